#!/bin/sh
# SPDX-License-Identifier: MIT
# Fails when a C (or C++) file in lib/, include/ or test/ differs from
# .clang-format, and names each such file.  Run from the source tree:
#   test/check-format.sh [clang-format]
# Reformat with: clang-format -i lib/*.[ch] include/*.h test/*.[ch] test/*.cpp
set -eu
cd "$(dirname "$0")/.."
fmt=${1:-clang-format}
bad=0
for f in lib/*.c lib/*.h include/*.h test/*.c test/*.h test/*.cpp; do
  if ! "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (clang-format -i $f)"
    bad=1
  fi
done
exit $bad
