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
#                   release tarballs, the library's tests on each of them
#
# Build trees go to ./build, ./build-asan and ./build-tsan; the other libuv
# releases and the trees built against them to ./build/libuv-<version>/.
# JOBS sets the parallelism (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")"
JOBS=${JOBS:-$(nproc)}

say() { printf '\n=== %s\n' "$*"; }

# Debian 12 packages the build and the tests use.
need_packages() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v cc >/dev/null || missing+=(gcc)
  command -v make >/dev/null || missing+=(make)
  command -v pkg-config >/dev/null || missing+=(pkg-config)
  command -v python3 >/dev/null || missing+=(python3)
  dpkg -s libuv1-dev >/dev/null 2>&1 || missing+=(libuv1-dev)
  if [ "$1" = test ]; then
    command -v clang >/dev/null || missing+=(clang)
    dpkg -s libclang-rt-14-dev >/dev/null 2>&1 || missing+=(libclang-rt-14-dev)
    command -v valgrind >/dev/null || missing+=(valgrind)
    # The package-deb test: cpack's DEB generator runs file and readelf,
    # the test checks dependencies with dpkg-shlibdeps.
    command -v file >/dev/null || missing+=(file)
    command -v readelf >/dev/null || missing+=(binutils)
    command -v dpkg-shlibdeps >/dev/null || missing+=(dpkg-dev)
  fi
  if [ ${#missing[@]} -ne 0 ]; then
    say "installing: ${missing[*]}"
    local sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

build() { # DIR [cmake args...]
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

run_tests() { # DIR [ctest args...]
  local dir=$1
  shift
  "$dir/test/test-libuv-version" # prints the libuv the tests load
  ctest --test-dir "$dir" -j "$JOBS" --output-on-failure --timeout 600 "$@"
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
  local tarball version root prefix sum
  if ! compgen -G "$shared/libuv-*.tar.gz" >/dev/null; then
    say "other libuv releases: skipped (no $shared/libuv-*.tar.gz)"
    return
  fi
  for tarball in "$shared"/libuv-*.tar.gz; do
    version=$(basename "$tarball" .tar.gz)
    version=${version#libuv-}
    root=build/libuv-$version
    prefix=$PWD/$root/prefix
    sum=$(sha256sum <"$tarball")
    say "libuv $version: the library's tests"
    if [ "$(cat "$prefix/.tarball" 2>/dev/null)" != "$sum" ]; then
      rm -rf "$root/src" "$root/obj" "$prefix"
      mkdir -p "$root/src"
      tar -xzf "$tarball" -C "$root/src" --strip-components=1
      cmake -S "$root/src" -B "$root/obj" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DLIBUV_BUILD_TESTS=OFF -DLIBUV_BUILD_BENCH=OFF \
            -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
      cmake --build "$root/obj" -j "$JOBS" >/dev/null
      cmake --install "$root/obj" >/dev/null
      echo "$sum" >"$prefix/.tarball"
    fi
    build "$root/uvtw" -DCMAKE_PREFIX_PATH="$prefix" -DUVTW_BUILD_BENCH=OFF \
          -DUVTW_BUILD_EXAMPLES=OFF
    run_tests "$root/uvtw" -R '^(test|readme)-'
  done
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
  say "release build"
  build build
  run_tests build
  say "quick benchmark (smoke run; asserts nothing about speed)"
  if ! build/bench/uvtw-bench --quick >build/bench-quick.out \
       2>build/bench-quick.log; then
    tail -n 40 build/bench-quick.log
    exit 1
  fi
  cat build/bench-quick.out
  other_libuvs
  say "ASan + UBSan build"
  build build-asan -DUVTW_SANITIZE=address,undefined -DUVTW_BUILD_BENCH=OFF \
        -DUVTW_CHECK_INVARIANTS=ON
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 run_tests build-asan
  say "TSan build"
  build build-tsan -DUVTW_SANITIZE=thread -DUVTW_BUILD_BENCH=OFF
  # The core model is single-threaded: TSan has nothing to find in it, so
  # it runs the short model (as under valgrind) and leaves the CI's time to
  # the threaded tests.
  UVTW_MODEL_STEPS=2000 \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_tests build-tsan
  say "all tests passed"
  ;;
*)
  echo "usage: $0 demo|test" >&2
  exit 2
  ;;
esac
