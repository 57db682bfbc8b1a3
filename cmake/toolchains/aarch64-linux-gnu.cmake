# SPDX-License-Identifier: MIT
# 64-bit Arm Linux with Debian's cross compiler (gcc-aarch64-linux-gnu),
# run under qemu-user (package qemu-user), which is invoked for each
# program: no binfmt_misc registration is needed.
#   cmake -S . -B build-aarch64 \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# The loader is the cross C library's (-L); LD_LIBRARY_PATH makes it load
# that C library too, ahead of /etc/ld.so.cache, which lists Debian's
# libc6:ARCH if that is installed (say with libuv1-dev:ARCH): a loader and
# a libc.so.6 of two glibc builds hang together.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu
    -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
