#!/bin/sh
# SPDX-License-Identifier: MIT
# The CMAKE_CROSSCOMPILING_EMULATOR of x86_64-w64-mingw32.cmake:
#   wine-run.sh WINEPREFIX DLL_DIRS PROGRAM [ARGS...]
# runs a Windows PROGRAM under wine, with its state in WINEPREFIX (created
# on first use) and DLL_DIRS, a colon-separated list, as the DLL search path
# (WINEPATH, which wine splits at semicolons, the CMake list separator).
set -e
WINEPREFIX=$1
WINEPATH=$(printf '%s' "$2" | tr ':' ';')
WINEDEBUG=${WINEDEBUG:--all}
export WINEPREFIX WINEPATH WINEDEBUG
shift 2
# The first start makes the prefix, tens of seconds; parallel tests wait for
# one to do it.  `wineboot --init` returns before the prefix is whole: the
# registry files are written when the wineserver it started exits, some
# seconds later (3 s after its last client).  So the prefix counts as made
# (.made) only once that server is gone; a failed or killed set-up leaves
# no .made, and the next test makes the prefix again.
if [ ! -f "$WINEPREFIX/.made" ]; then
  mkdir -p "$WINEPREFIX"
  flock "$WINEPREFIX/.init" sh -c '
    [ -f "$WINEPREFIX/.made" ] ||
      { wineboot --init >/dev/null 2>&1 &&
        timeout 120 wineserver --wait &&
        touch "$WINEPREFIX/.made"; }'
fi
# The program's output goes through files, not straight to CTest's pipes:
# the processes wine starts for itself (its server, services.exe,
# winedevice.exe) inherit the output of the program that started them and
# keep it open until the server exits, and CTest (as execute_process) reads
# a test's output to its end, so the first tests of a run would last as
# long as the run.  Stdout and stderr stay apart (the --list check reads
# them apart); each is printed whole when the program ends.  Not exec: a
# program that wine could not start leaves no output of its own
# (WINEDEBUG=-all silences wine's), so its exit status is said here.
# Wine itself now and then fails to start a program: status 1 and no
# output at all, in a hundredth of a second (once in about 2,000 starts
# here).  No test program ends so: each prints its case or its failure.
# Such a start is tried once more.
out=$(mktemp "$WINEPREFIX/out.XXXXXX")
err=$(mktemp "$WINEPREFIX/err.XXXXXX")
for try in 1 2; do
  status=0
  wine "$@" >"$out" 2>"$err" </dev/null || status=$?
  if [ "$status" -ne 1 ] || [ -s "$out" ] || [ -s "$err" ]; then
    break
  fi
  echo "wine-run.sh: $1 did not start (try $try)" >&2
done
cat "$out"
cat "$err" >&2
rm -f "$out" "$err"
if [ "$status" -ne 0 ]; then
  echo "wine-run.sh: $1 exited with status $status" >&2
fi
exit "$status"
