#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the build tree into a scratch prefix, then builds and runs a tiny
# consumer against it both ways: find_package(uvtw) (shared and static
# targets) and pkg-config.
# Usage: install-consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/uvtw.h"
test -f "$prefix/lib/pkgconfig/uvtw.pc" || test -f "$prefix"/lib/*/pkgconfig/uvtw.pc

# 1. CMake package.
cmake -S "$src/test/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      >/dev/null
cmake --build "$work/cmake" >/dev/null
LD_LIBRARY_PATH="$(dirname "$(find "$prefix" -name 'libuvtw.so' | head -1)")" \
  "$work/cmake/consumer-shared"
"$work/cmake/consumer-static"

# 2. pkg-config.
pcdir=$(dirname "$(find "$prefix" -name uvtw.pc | head -1)")
export PKG_CONFIG_PATH="$pcdir"
cc $(pkg-config --cflags uvtw) "$src/test/consumer/main.c" \
   $(pkg-config --libs uvtw) -o "$work/consumer-pc"
LD_LIBRARY_PATH="$(pkg-config --variable=libdir uvtw)" "$work/consumer-pc"

# 3. Only uvtw_* names are exported.
so=$(find "$prefix" -name 'libuvtw.so' | head -1)
bad=$(nm -D --defined-only "$so" | awk '$2 ~ /[TDBR]/ {print $3}' |
      grep -v '^uvtw_' || true)
if [ -n "$bad" ]; then
  echo "exported names other than uvtw_*: $bad" >&2
  exit 1
fi
echo "install-consumer: ok"
