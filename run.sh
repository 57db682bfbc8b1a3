#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The two commands of the README.
#
#   ./run.sh demo   installs what is missing, builds, and runs the echo
#                   server demo (heartbeats, idle timeouts, request deadlines)
#   ./run.sh test   installs what is missing, builds, and passes the whole
#                   test suite: a release build, an ASan+UBSan build and a
#                   TSan build, each under CTest, plus the fuzzer, valgrind,
#                   the install, package and subproject tests (release
#                   build only) and a quick benchmark smoke run, all on the
#                   system libuv; then, if ../shared/libuv/ holds libuv
#                   release tarballs, the library's tests on each of them;
#                   a clang release build with all its tests; and the
#                   library's tests and the README's examples on the other
#                   targets: i686 (natively or qemu-i386), aarch64 and
#                   armv7 (qemu-user), Windows x86-64 with MinGW-w64
#                   (wine)
#
# Build trees go to ./build, ./build-asan, ./build-tsan and ./build-clang;
# the other libuv releases and the trees built against them to
# ./build/libuv-<version>/; the other targets' to ./build-cross/<target>/.
# JOBS sets the parallelism (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")"
JOBS=${JOBS:-$(nproc)}

say() { printf '\n=== %s\n' "$*"; }

# A stage of the test run: stage NAME ends the one before, with its time.
stage_name=
stage_start=
stage() {
  if [ -n "$stage_name" ]; then
    printf '=== %s: %ds\n' "$stage_name" $((SECONDS - stage_start))
  fi
  stage_name=$*
  stage_start=$SECONDS
  [ $# -eq 0 ] || say "$*"
}

# Succeeds if Debian package PKG is installed for this machine's
# architecture.  Plain `dpkg -s PKG` fails once a second architecture's
# instance is installed too (ambiguous: libuv1-dev and libc6-dev after a
# cross fallback below), and `dpkg -s PKG:ARCH` fails for an Architecture:
# all package (wine): one, then the other.
installed() { # PKG
  dpkg -s "$1" >/dev/null 2>&1 ||
    dpkg -s "$1:$(dpkg --print-architecture)" >/dev/null 2>&1
}

# Debian 12 packages the build and the tests use.
need_packages() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v cc >/dev/null || missing+=(gcc)
  # gcc only recommends the C library's headers and start files, and
  # recommends are not installed here.
  installed libc6-dev || missing+=(libc6-dev)
  command -v make >/dev/null || missing+=(make)
  command -v pkg-config >/dev/null || missing+=(pkg-config)
  command -v python3 >/dev/null || missing+=(python3)
  installed libuv1-dev || missing+=(libuv1-dev)
  if [ "$1" = test ]; then
    command -v clang >/dev/null || missing+=(clang)
    installed libclang-rt-14-dev || missing+=(libclang-rt-14-dev)
    command -v valgrind >/dev/null || missing+=(valgrind)
    command -v clang-format >/dev/null || missing+=(clang-format)
    # The bench-plot test draws the chart with gnuplot.
    command -v gnuplot >/dev/null || missing+=(gnuplot-nox)
    # The task protocol's model check (test/spin-check.sh).
    command -v spin >/dev/null || missing+=(spin)
    # The package-deb test: cpack's DEB generator runs file and readelf,
    # the test checks dependencies with dpkg-shlibdeps.
    command -v file >/dev/null || missing+=(file)
    command -v readelf >/dev/null || missing+=(binutils)
    command -v dpkg-shlibdeps >/dev/null || missing+=(dpkg-dev)
    # The other targets (cross_tests): compilers with their C libraries,
    # qemu-user (run per program: nothing registered with binfmt_misc) and
    # wine for 64-bit Windows programs.
    local pkg
    for pkg in gcc-i686-linux-gnu libc6-dev-i386-cross \
               gcc-aarch64-linux-gnu libc6-dev-arm64-cross \
               gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user \
               gcc-mingw-w64-x86-64 wine wine64; do
      installed "$pkg" || missing+=("$pkg")
    done
  fi
  if [ ${#missing[@]} -ne 0 ]; then
    say "installing: ${missing[*]}"
    local sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    # No recommends: qemu-user's would register binfmt_misc handlers,
    # wine's pull in desktop packages.
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" \
          >/dev/null
  fi
}

build() { # DIR [cmake args...]
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

# Runs the tests, then says how many passed and on which libuv, as
# test-libuv-version printed it (through the tree's emulator, if any).
run_tests() { # DIR [ctest args...]
  local dir=$1 count libuv
  shift
  ctest --test-dir "$dir" -j "$JOBS" --output-on-failure --timeout 600 "$@" |
    tee "$dir/ctest.out"
  count=$(sed -n 's/.*tests failed out of \([0-9]*\)$/\1/p' "$dir/ctest.out")
  libuv=$(grep -a -m1 -o 'libuv [^ ]* at run time' \
               "$dir/Testing/Temporary/LastTest.log" || echo 'libuv ?')
  printf '=== %s: %s tests passed, %s\n' "$dir" "$count" "$libuv"
}

# Builds a libuv release tarball once, without its own tests, into
# ROOT/prefix (rebuilt only if the tarball changes).
libuv_from_tarball() { # TARBALL ROOT [cmake args...]
  local tarball=$1 root=$2 prefix sum
  shift 2
  prefix=$PWD/$root/prefix
  sum=$(sha256sum <"$tarball")
  if [ "$(cat "$prefix/.tarball" 2>/dev/null)" != "$sum" ]; then
    rm -rf "$root/src" "$root/obj" "$prefix"
    mkdir -p "$root/src"
    tar -xzf "$tarball" -C "$root/src" --strip-components=1
    cmake -S "$root/src" -B "$root/obj" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DLIBUV_BUILD_TESTS=OFF -DLIBUV_BUILD_BENCH=OFF \
          -DCMAKE_INSTALL_PREFIX="$prefix" "$@" >/dev/null
    cmake --build "$root/obj" -j "$JOBS" >/dev/null
    cmake --install "$root/obj" >/dev/null
    echo "$sum" >"$prefix/.tarball"
  fi
}

# The libuv releases in ../shared/libuv/ (libuv-<version>.tar.gz, optional:
# absent in a user's clone).  Each is built once, without its own tests,
# into build/libuv-<version>/prefix (rebuilt only if the tarball changes);
# uvtw is built against it (the test binaries find it by their rpath, and
# test-libuv-version checks that they do) and its library tests and the
# README's examples run there.  The fuzzer and valgrind drive the pure
# core, which makes no libuv call, and the install, package, subproject and
# echo-server tests run on the system libuv only: they would add minutes,
# not coverage of what differs between libuv releases.
other_libuvs() {
  local shared=../shared/libuv
  local tarball version root
  if ! compgen -G "$shared/libuv-*.tar.gz" >/dev/null; then
    stage
    say "other libuv releases: skipped (no $shared/libuv-*.tar.gz)"
    return
  fi
  for tarball in "$shared"/libuv-*.tar.gz; do
    version=$(basename "$tarball" .tar.gz)
    version=${version#libuv-}
    root=build/libuv-$version
    stage "libuv $version: the library's tests"
    libuv_from_tarball "$tarball" "$root"
    build "$root/uvtw" -DCMAKE_PREFIX_PATH="$PWD/$root/prefix" \
          -DUVTW_BUILD_BENCH=OFF -DUVTW_BUILD_EXAMPLES=OFF
    run_tests "$root/uvtw" -R '^(test|readme|docs)-'
  done
}

# The library's tests and the README's examples on another target, cross-
# compiled with cmake/toolchains/TARGET.cmake, whose emulator runs every
# program (the loader of the cross C library for i686, qemu-user for Arm,
# wine for Windows).  libuv is the newest release in ../shared/libuv/,
# cross-built into the tree.  Without one, the Linux targets take Debian's
# multiarch libuv1-dev:ARCH, which adds ARCH to dpkg's architectures (a
# change to the system, said as it is made); Windows, which Debian has no
# libuv for, is skipped.
cross_tests() { # TARGET DEBIAN_ARCH [VAR=VALUE... for the tests] [-ctest-arg...]
  local target=$1 arch=$2 shared=../shared/libuv
  local tarball root prefix version libdir sudo= arg
  local toolchain=$PWD/cmake/toolchains/$target.cmake
  local env_args=() ctest_args=()
  shift 2
  for arg in "$@"; do
    case $arg in
    -*) ctest_args+=("$arg") ;;
    *) env_args+=("$arg") ;;
    esac
  done
  root=build-cross/$target
  stage "$target: the library's tests"
  tarball=$(compgen -G "$shared/libuv-*.tar.gz" | sort -V | tail -n 1 || true)
  if [ -n "$tarball" ]; then
    version=$(basename "$tarball" .tar.gz)
    prefix=$PWD/$root/$version/prefix
    libuv_from_tarball "$tarball" "$root/$version" \
                       -DCMAKE_TOOLCHAIN_FILE="$toolchain"
    build "$root/uvtw" -DCMAKE_PREFIX_PATH="$prefix" \
          -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
          -DUVTW_BUILD_BENCH=OFF -DUVTW_BUILD_EXAMPLES=OFF
  elif [ -z "$arch" ]; then
    say "$target: skipped (no $shared/libuv-*.tar.gz; Debian has no" \
        "libuv for it)"
    return
  else
    say "$target: no $shared/libuv-*.tar.gz; Debian's libuv1-dev:$arch"
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    if ! dpkg -s "libuv1-dev:$arch" >/dev/null 2>&1; then
      say "installing libuv1-dev:$arch (dpkg --add-architecture $arch)"
      $sudo dpkg --add-architecture "$arch"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive \
        $sudo apt-get install -y -qq --no-install-recommends \
        "libuv1-dev:$arch" >/dev/null
    fi
    # The cross compiler links with /usr/lib/TRIPLET, where the loader on
    # the target side would not look: the rpath says where.  (The C
    # library still comes from the cross toolchain's directory, ahead of
    # the rpath: the toolchain files' emulators see to it.)
    # CMAKE_LIBRARY_ARCHITECTURE: find_library (behind pkg-config's
    # imported target) would find the host's libuv.so in
    # /usr/lib/x86_64-linux-gnu first.
    libdir=/usr/lib/$(dpkg-architecture -a "$arch" -q DEB_HOST_MULTIARCH)
    PKG_CONFIG_LIBDIR=$libdir/pkgconfig \
      build "$root/uvtw" -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
            -DCMAKE_LIBRARY_ARCHITECTURE="${libdir#/usr/lib/}" \
            -DCMAKE_BUILD_RPATH="$libdir" \
            -DUVTW_BUILD_BENCH=OFF -DUVTW_BUILD_EXAMPLES=OFF
  fi
  (
    [ ${#env_args[@]} -eq 0 ] || export "${env_args[@]}"
    run_tests "$root/uvtw" -R '^(test|readme|docs)-' ${ctest_args[@]+"${ctest_args[@]}"}
  )
}

case "${1:-}" in
demo)
  need_packages demo
  say "building"
  build build
  say "running the echo server demo"
  exec example-echo-server/demo.sh build
  ;;
test)
  need_packages test
  ulimit -n 4096 2>/dev/null || true
  stage "release build"
  build build
  run_tests build
  stage "quick benchmark (smoke run; asserts nothing about speed)"
  if ! build/bench/uvtw-bench --quick >build/bench-quick.out \
       2>build/bench-quick.log; then
    tail -n 40 build/bench-quick.log
    exit 1
  fi
  cat build/bench-quick.out
  other_libuvs
  stage "ASan + UBSan build"
  build build-asan -DUVTW_SANITIZE=address,undefined -DUVTW_BUILD_BENCH=OFF \
        -DUVTW_CHECK_INVARIANTS=ON
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 run_tests build-asan
  stage "TSan build"
  build build-tsan -DUVTW_SANITIZE=thread -DUVTW_BUILD_BENCH=OFF
  # The core model is single-threaded: TSan has nothing to find in it, so
  # it runs the short model (as under valgrind) and leaves the CI's time to
  # the threaded tests.
  UVTW_MODEL_STEPS=2000 \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_tests build-tsan
  stage "clang release build"
  build build-clang -DCMAKE_C_COMPILER=clang
  run_tests build-clang
  cross_tests aarch64-linux-gnu arm64
  cross_tests i686-linux-gnu i386
  # The core model test takes about three minutes under qemu-arm: the
  # short model, as under TSan.
  cross_tests arm-linux-gnueabihf armhf UVTW_MODEL_STEPS=2000
  # Under wine a test program now and then fails to start, or does not
  # exit after its last line (seen in one cold run here, not in the
  # next): a test that fails runs once more, and a failure that repeats
  # fails the stage.  A wine program spends most of its time waiting for
  # wineserver, so 4 tests run at once (73 s against 145 s with 2, here).
  cross_tests x86_64-w64-mingw32 '' --repeat=until-pass:2 -j4
  stage
  say "all tests passed"
  ;;
*)
  echo "usage: $0 demo|test" >&2
  exit 2
  ;;
esac
