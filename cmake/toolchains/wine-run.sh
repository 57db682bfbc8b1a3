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
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  # The first start makes the prefix, tens of seconds; parallel tests wait
  # for one to do it.
  mkdir -p "$WINEPREFIX"
  flock "$WINEPREFIX/.init" sh -c \
    '[ -f "$WINEPREFIX/system.reg" ] || wineboot --init >/dev/null 2>&1'
fi
exec wine "$@"
