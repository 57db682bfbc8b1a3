#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds test/subproject, a project that takes uvtw in as a subproject
# (HOW = add_subdirectory or FetchContent with a local SOURCE_DIR), runs its
# consumer linked both ways, and checks that uvtw's tests, bench and
# examples were neither configured nor built, nor its install rules added.
# Usage: subproject.sh SOURCE_DIR HOW
set -euo pipefail
src=$1
how=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake -S "$src/test/subproject" -B "$work/build" -DUVTW_SOURCE="$src" \
      -DHOW="$how" >"$work/configure.log" || {
  cat "$work/configure.log"
  exit 1
}
cmake --build "$work/build" --parallel 2 >"$work/build.log" || {
  cat "$work/build.log"
  exit 1
}
"$work/build/consumer-shared"
"$work/build/consumer-static"

for option in UVTW_BUILD_TESTS UVTW_BUILD_BENCH UVTW_BUILD_EXAMPLES \
              UVTW_INSTALL; do
  if ! grep -qx "$option:BOOL=OFF" "$work/build/CMakeCache.txt"; then
    echo "$how: $option is not OFF by default in a subproject" >&2
    exit 1
  fi
done
# What each of them would have built or written, under uvtw's binary dir.
found=$(find "$work/build" \( -name 'test-timer-*' -o -name 'uvtw-bench' \
        -o -name 'uvtw-echo-server' -o -name 'uvtw.pc' \
        -o -name 'uvtwConfig.cmake' \) -print)
if [ -n "$found" ]; then
  echo "$how: a subproject built more than its libraries:" >&2
  echo "$found" >&2
  exit 1
fi
echo "subproject ($how): ok"
