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
#                   a clang release build with its tests (but the SPIN
#                   models, checked once, in the release build); and the
#                   library's tests and the README's examples on the other
#                   targets: i686 (natively or qemu-i386), aarch64 and
#                   armv7 (qemu-user), Windows x86-64 with MinGW-w64
#                   (wine)
#
# What is missing is installed with apt-get (need_packages).  A package
# index that fails to download is a warning; a package the build needs that
# cannot be installed stops the run, saying which and why; a stage or test
# whose own packages cannot be installed is skipped, and the end of the run
# says so and why, as it does for a stage without libuv tarballs.
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

# Says that WHAT is skipped and why, and again at the end of the run.
skip() { # WHAT WHY
  say "$1: skipped ($2)"
  skipped+=("$1: $2")
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

# Runs a command as root: directly, or through sudo.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  else
    sudo "$@"
  fi
}

# Succeeds if what Debian package PKG brings is here: the command, for the
# tools (which may come from elsewhere than Debian), else the package.
have() { # PKG
  case $1 in
  gcc) command -v cc >/dev/null ;;
  g++) command -v c++ >/dev/null ;;
  gnuplot-nox) command -v gnuplot >/dev/null ;;
  binutils) command -v readelf >/dev/null ;;
  dpkg-dev) command -v dpkg-shlibdeps >/dev/null ;;
  ninja-build) command -v ninja >/dev/null ;;
  cmake | make | pkg-config | python3 | clang | clang-format | valgrind | \
    spin | file)
    command -v "$1" >/dev/null ;;
  *) installed "$1" ;;
  esac
}

# apt-get update, tried 3 times 20 s apart: a mirror can fail an index
# file for minutes while it syncs.  If some index still fails, that is a
# warning, not an error: apt keeps the lists it has, and a package they do
# not hold fails at its install, which says so.
apt_updated=
apt_update() {
  local try out
  for try in 1 2 3; do
    if out=$(as_root apt-get update -qq 2>&1); then
      apt_updated=1
      return 0
    fi
    echo "apt-get update failed (try $try of 3):"
    printf '%s\n' "$out" | tail -n 4 | sed 's/^/  /'
    if [ "$try" -lt 3 ]; then
      echo "again in 20 s"
      sleep 20
    fi
  done
  echo "warning: apt-get update failed 3 times; going on with the" \
       "package lists apt has"
  apt_updated=1
}

# apt-get install PKG...; on failure, apt's errors are in apt_error.  No
# recommends: qemu-user's would register binfmt_misc handlers, wine's pull
# in desktop packages.
apt_error=
apt_install() { # PKG...
  local out
  [ -n "$apt_updated" ] || apt_update
  if out=$(as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y \
             -qq --no-install-recommends "$@" 2>&1); then
    return 0
  fi
  apt_error=$(printf '%s\n' "$out" | sed -n 's/^E: //p' | head -n 3 |
                paste -s -d ';' | sed 's/;/; /g')
  [ -n "$apt_error" ] || apt_error=$(printf '%s\n' "$out" | tail -n 1)
  return 1
}

# Debian 12 packages the build and the tests use, in groups: the core
# ones, which the build and most tests need, and one group for each stage
# or test that can be left out (the test itself is skipped where its tool
# is missing: test/extra-tests.cmake).  "NAME: PKG...", NAME saying what
# the group is for.
core_packages() { # demo|test
  # gcc only recommends the C library's headers and start files, and
  # recommends are not installed here.
  echo cmake gcc libc6-dev make pkg-config python3 libuv1-dev
  # The package-deb test: cpack's DEB generator runs file and readelf,
  # the test checks dependencies with dpkg-shlibdeps.
  [ "$1" != test ] || echo file binutils dpkg-dev
}
optional_groups=(
  "clang: clang libclang-rt-14-dev"
  "format check: clang-format"
  "valgrind: valgrind"
  # The bench-plot test draws the chart with gnuplot.
  "bench-plot: gnuplot-nox"
  # The task protocol's model checks (test/spin-check.sh, the Relacy
  # model: C++).
  "SPIN model check: spin"
  "Relacy model check: relacy-dev g++"
  "ninja-tree: ninja-build"
  # The other targets (cross_tests): compilers with their C libraries,
  # qemu-user (run per program: nothing registered with binfmt_misc) and
  # wine for 64-bit Windows programs.
  "i686-linux-gnu: gcc-i686-linux-gnu libc6-dev-i386-cross"
  "aarch64-linux-gnu: gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
  "arm-linux-gnueabihf: gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
   qemu-user"
  "x86_64-w64-mingw32: gcc-mingw-w64-x86-64 wine wine64"
)

# What could not be installed, by group NAME: why (apt's errors).
declare -A unavailable=()
# "what: why" for each thing the test command skipped, said at its end.
skipped=()

# Installs what is missing.  A core package that cannot be installed stops
# the run, naming it; an optional group's makes its stage or test skipped,
# with the reason.
need_packages() { # demo|test
  local core=() missing=() group name pkg
  for pkg in $(core_packages "$1"); do
    have "$pkg" || core+=("$pkg")
  done
  missing=(${core[@]+"${core[@]}"})
  if [ "$1" = test ]; then
    for group in "${optional_groups[@]}"; do
      for pkg in ${group#*:}; do
        have "$pkg" || missing+=("$pkg")
      done
    done
  fi
  [ ${#missing[@]} -ne 0 ] || return 0
  say "installing: ${missing[*]}"
  # All at once, the usual case; one group at a time if that fails.
  apt_install "${missing[@]}" && return 0
  if [ ${#missing[@]} -ne ${#core[@]} ]; then
    echo "apt-get install failed: $apt_error"
    echo "installing the core packages, then each optional group alone"
  fi
  # The first try was the core packages alone, or they are tried alone.
  if [ ${#core[@]} -ne 0 ] &&
     { [ ${#missing[@]} -eq ${#core[@]} ] || ! apt_install "${core[@]}"; }
  then
    echo "run.sh: cannot install ${core[*]}, which the build needs:" \
         "$apt_error" >&2
    exit 1
  fi
  for group in "${optional_groups[@]}"; do
    name=${group%%:*}
    missing=()
    for pkg in ${group#*:}; do
      have "$pkg" || missing+=("$pkg")
    done
    [ ${#missing[@]} -ne 0 ] || continue
    if ! apt_install "${missing[@]}"; then
      unavailable[$name]="cannot install ${missing[*]}: $apt_error"
      echo "$name: will be skipped (${unavailable[$name]})"
    fi
  done
  # A test the tree leaves out for want of its tool is said at the end.
  for name in "format check" valgrind bench-plot "SPIN model check" \
              "Relacy model check" ninja-tree; do
    [ -z "${unavailable[$name]-}" ] ||
      skipped+=("$name: ${unavailable[$name]}")
  done
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
    skip "other libuv releases" "no $shared/libuv-*.tar.gz"
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
# libuv for, is skipped; so is a target whose compiler or emulator could
# not be installed, or whose libuv1-dev:ARCH cannot be.
cross_tests() { # TARGET DEBIAN_ARCH [VAR=VALUE... for the tests] [-ctest-arg...]
  local target=$1 arch=$2 shared=../shared/libuv
  local tarball root prefix version libdir arg
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
  if [ -n "${unavailable[$target]-}" ]; then
    skip "$target" "${unavailable[$target]}"
    return
  fi
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
    skip "$target" "no $shared/libuv-*.tar.gz; Debian has no libuv for it"
    return
  else
    say "$target: no $shared/libuv-*.tar.gz; Debian's libuv1-dev:$arch"
    if ! dpkg -s "libuv1-dev:$arch" >/dev/null 2>&1; then
      say "installing libuv1-dev:$arch (dpkg --add-architecture $arch)"
      as_root dpkg --add-architecture "$arch"
      apt_update
      if ! apt_install "libuv1-dev:$arch"; then
        skip "$target" "cannot install libuv1-dev:$arch: $apt_error"
        return
      fi
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
  if [ -n "${unavailable[clang]-}" ]; then
    skip "clang release build and fuzz-core" "${unavailable[clang]}"
  else
    build build-clang -DCMAKE_C_COMPILER=clang
    # The SPIN models check the protocol, not the compiler: the release
    # tree checked them, and here they would take minutes more.
    run_tests build-clang -E '^spin-'
  fi
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
  if [ ${#skipped[@]} -eq 0 ]; then
    say "all tests passed"
  else
    say "all tests passed; skipped:"
    printf '  %s\n' "${skipped[@]}"
  fi
  ;;
*)
  echo "usage: $0 demo|test" >&2
  exit 2
  ;;
esac
