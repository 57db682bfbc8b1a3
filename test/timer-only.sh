#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds uvtw with -DUVTW_TASKS=OFF, the timer half alone, checks that no
# task file was compiled into the library, and runs that tree's tests but
# the cases that submit tasks (uvtw_submit returns UV_ENOSYS there).
# Usage: timer-only.sh SOURCE_DIR [CMAKE_ARG...]
set -euo pipefail
src=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
      -DUVTW_TASKS=OFF -DUVTW_BUILD_BENCH=OFF -DUVTW_BUILD_EXAMPLES=OFF \
      -DUVTW_INSTALL=OFF "$@" >"$work/configure.log" || {
  cat "$work/configure.log"
  exit 1
}
cmake --build "$work/build" --parallel 2 >"$work/build.log" || {
  cat "$work/build.log"
  exit 1
}
objects=$(ar t "$work/build/libuvtw.a")
if grep -qE '^task[-.]' <<<"$objects" ||
   ! grep -qx 'tasks-off.c.o' <<<"$objects"; then
  echo "timer-only: the library holds task objects, or lacks tasks-off.c:" >&2
  echo "$objects" >&2
  exit 1
fi
# The cases that submit tasks; every other test of the tree runs.
tasks='/(tasks_default|tasks_prepare|sum_is_fired|virtual_on_time'
tasks+='|advance_errors|liveness|producers|far_and_records'
tasks+='|task_earlier_than_armed)$'
ctest --test-dir "$work/build" -j2 -E "$tasks" --output-on-failure \
      >"$work/test.log" || {
  cat "$work/test.log"
  exit 1
}
tail -n 3 "$work/test.log"
echo "timer-only: ok"
