#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Debian packages as a packager would (a library-only tree with
# prefix /usr, then `cpack -G DEB`), checks their names, dependencies and
# contents, asks apt whether they would install (a simulation), unpacks
# them with `dpkg -x` into a scratch root, and builds and runs
# test/consumer against that root through pkg-config and through
# find_package(uvtw).  Nothing is installed on the machine.
# Usage: package-deb.sh SOURCE_DIR
# Under pipefail, no pipeline ends in `grep -q`: grep would exit at its
# first match, and the writer's SIGPIPE would fail the pipeline.
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root

fail() {
  echo "package-deb: $*" >&2
  exit 1
}

quiet() { # LOG COMMAND...: runs COMMAND, shows its output only on failure
  local log=$1
  shift
  "$@" >"$log" 2>&1 || {
    cat "$log" >&2
    fail "failed: $*"
  }
}

version=$(sed -n 's/^#define UVTW_VERSION_[A-Z]\+ \+\([0-9]\+\)$/\1/p' \
          "$src/include/uvtw.h" | paste -sd.)
major=${version%%.*}
arch=$(dpkg --print-architecture)
runtime=$work/build/packages/libuvtw${major}_${version}-1_${arch}.deb
dev=$work/build/packages/libuvtw-dev_${version}-1_${arch}.deb

# 1. The packages.
quiet "$work/configure.log" cmake -S "$src" -B "$work/build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DUVTW_BUILD_TESTS=OFF -DUVTW_BUILD_BENCH=OFF -DUVTW_BUILD_EXAMPLES=OFF
quiet "$work/build.log" cmake --build "$work/build" --parallel 2
(cd "$work/build" && quiet "$work/cpack.log" cpack -G DEB)
test -f "$runtime" || fail "no $(basename "$runtime")"
test -f "$dev" || fail "no $(basename "$dev")"

# 2. Control fields.
field() { dpkg-deb -f "$1" "$2"; }
has_dep() { # DEB DEPENDENCY
  field "$1" Depends | tr ',' '\n' | sed 's/^ *//' |
    grep -xF "$2" >/dev/null ||
    fail "$(basename "$1"): Depends lacks '$2': $(field "$1" Depends)"
}
[ "$(field "$runtime" Package)" = "libuvtw$major" ] || fail "runtime name"
[ "$(field "$dev" Package)" = libuvtw-dev ] || fail "dev name"
has_dep "$runtime" "libuv1 (>= 1.44)"
has_dep "$dev" "libuvtw$major (= $version-1)"
has_dep "$dev" "libuv1-dev (>= 1.44)"

# 3. Contents: the runtime package has the library and nothing to build
# with; the dev package has the rest; no file is in both.
list() { dpkg-deb -c "$1" | awk '{print $6}' | grep -v '/$' | sort; }
list "$runtime" >"$work/runtime.list"
list "$dev" >"$work/dev.list"
expect() { # LIST REGEX
  grep -qE "$2" "$1" || fail "$(basename "$1" .list) package lacks $2"
}
libdir='\./usr/lib/[a-z0-9_]+-linux-gnu[a-z0-9_]*'
expect "$work/runtime.list" "^$libdir/libuvtw\.so\.$major\$"
expect "$work/runtime.list" "^$libdir/libuvtw\.so\.$version\$"
[ "$(wc -l <"$work/runtime.list")" -eq 2 ] ||
  fail "runtime package holds more than the library:" \
       "$(cat "$work/runtime.list")"
expect "$work/dev.list" '^\./usr/include/uvtw\.h$'
expect "$work/dev.list" "^$libdir/libuvtw\.so\$"
expect "$work/dev.list" "^$libdir/libuvtw\.a\$"
expect "$work/dev.list" "^$libdir/cmake/uvtw/uvtwConfig\.cmake\$"
expect "$work/dev.list" "^$libdir/pkgconfig/uvtw\.pc\$"
both=$(comm -12 "$work/runtime.list" "$work/dev.list")
[ -z "$both" ] || fail "in both packages: $both"

# 4. Unpack; the library's SONAME, and its dependencies against what
# dpkg-shlibdeps finds (every package it names is declared, at a version
# at least as high).
dpkg -x "$runtime" "$root"
dpkg -x "$dev" "$root"
so=$(find "$root" -name "libuvtw.so.$version")
lib=$(dirname "$so")
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libuvtw.so.$major" ] || fail "SONAME is '$soname'"
mkdir -p "$work/shlibdeps/debian"
printf 'Source: uvtw\n\nPackage: libuvtw%s\nArchitecture: any\n' "$major" \
  >"$work/shlibdeps/debian/control"
found=$(cd "$work/shlibdeps" && dpkg-shlibdeps -O "$so" 2>/dev/null |
        sed -n 's/^shlibs:Depends=//p')
[ -n "$found" ] || fail "dpkg-shlibdeps found no dependencies"
declared=$(field "$runtime" Depends)
for dep in $(echo "$found" | tr -d ' ' | tr ',' '\n'); do
  name=${dep%%(*}
  min=$(echo "$dep" | sed -n 's/.*(>=\(.*\))/\1/p')
  have=$(echo "$declared" | tr ',' '\n' |
         sed -n "s/^ *$name (>= \(.*\))\$/\1/p")
  [ -n "$have" ] || fail "dpkg-shlibdeps wants $dep; Depends: $declared"
  [ -z "$min" ] || dpkg --compare-versions "$have" ge "$min" ||
    fail "dpkg-shlibdeps wants $dep; Depends: $declared"
done

# 5. apt would install both on this machine: their dependencies resolve.
# A simulation, without apt's lock: it changes nothing.
sim=$(apt-get install --simulate -o Debug::NoLocking=1 "$runtime" "$dev" \
      2>&1) || fail "apt-get --simulate: $sim"
for package in "libuvtw$major" libuvtw-dev; do
  echo "$sim" | grep -E "^Conf $package |^$package is already the newest" \
    >/dev/null ||
    fail "apt-get --simulate would not install $package: $sim"
done

# 6. A consumer through pkg-config, linked to the unpacked library.
export PKG_CONFIG_PATH=$lib/pkgconfig
[ "$(pkg-config --modversion uvtw)" = "$version" ] ||
  fail "uvtw.pc says version $(pkg-config --modversion uvtw)"
# shellcheck disable=SC2046
cc $(pkg-config --cflags uvtw) "$src/test/consumer/main.c" \
   $(pkg-config --libs uvtw) -o "$work/consumer-pc"
readelf -d "$work/consumer-pc" | grep -F "[libuvtw.so.$major]" >/dev/null ||
  fail "the consumer does not need libuvtw.so.$major"
LD_LIBRARY_PATH=$lib "$work/consumer-pc"
LD_LIBRARY_PATH=$lib ldd "$work/consumer-pc" |
  grep -F "=> $lib/libuvtw.so.$major " >/dev/null ||
  fail "the consumer did not load the unpacked library"

# 7. A consumer through find_package(uvtw), shared and static.
quiet "$work/consumer-configure.log" cmake -S "$src/test/consumer" \
  -B "$work/consumer" -DCMAKE_PREFIX_PATH="$root/usr"
quiet "$work/consumer-build.log" cmake --build "$work/consumer"
LD_LIBRARY_PATH=$lib "$work/consumer/consumer-shared"
"$work/consumer/consumer-static"
echo "package-deb: ok ($(basename "$runtime"), $(basename "$dev"))"
