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
# seconds later, and until then the prefix is still being set up.  So the
# prefix counts as made (.made) only once that server is gone.
if [ ! -f "$WINEPREFIX/.made" ]; then
  mkdir -p "$WINEPREFIX"
  flock "$WINEPREFIX/.init" sh -c '
    [ -f "$WINEPREFIX/.made" ] && exit 0
    wineboot --init >/dev/null 2>&1
    wineserver --wait
    touch "$WINEPREFIX/.made"'
fi
# Not exec: a program that wine could not start leaves no output of its own
# (WINEDEBUG=-all silences wine's), so its exit status is said here.
status=0
wine "$@" || status=$?
if [ "$status" -ne 0 ]; then
  echo "wine-run.sh: $1 exited with status $status" >&2
fi
exit "$status"
