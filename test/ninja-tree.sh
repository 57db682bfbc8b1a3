#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures the whole project (tests, fuzzer, bench, examples) with the
# Ninja generator, which refuses a tree where two rules make one file, then
# builds the libraries, the fuzzer, the echo server and one test program,
# and runs that program's tests in the Ninja tree.
# Usage: ninja-tree.sh SOURCE_DIR NINJA [CMAKE_ARG...]
set -euo pipefail
src=$1
ninja=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake -G Ninja -DCMAKE_MAKE_PROGRAM="$ninja" -S "$src" -B "$work/build" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$work/configure.log" 2>&1 || {
  cat "$work/configure.log"
  exit 1
}
targets=(uvtw uvtw_static uvtw-echo-server test-timer-order)
# Built only when clang is found (test/extra-tests.cmake).
if "$ninja" -C "$work/build" -t targets all | grep -q '^fuzz-core-build:'; then
  targets+=(fuzz-core-build)
fi
cmake --build "$work/build" --parallel 2 --target "${targets[@]}" \
      >"$work/build.log" 2>&1 || {
  cat "$work/build.log"
  exit 1
}
ctest --test-dir "$work/build" -R '^test-timer-order' --output-on-failure \
      >"$work/test.log" || {
  cat "$work/test.log"
  exit 1
}
tail -n 3 "$work/test.log"
echo "ninja tree: ok (built ${targets[*]})"
