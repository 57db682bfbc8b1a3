# SPDX-License-Identifier: MIT
# 32-bit Arm Linux (armv7, hard float) with Debian's cross compiler
# (gcc-arm-linux-gnueabihf), run under qemu-user (package qemu-user), which
# is invoked for each program: no binfmt_misc registration is needed.
#   cmake -S . -B build-armhf \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm-linux-gnueabihf.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7l)
set(CMAKE_C_COMPILER arm-linux-gnueabihf-gcc)
# The loader is the cross C library's (-L); LD_LIBRARY_PATH makes it load
# that C library too, ahead of /etc/ld.so.cache, which lists Debian's
# libc6:ARCH if that is installed (say with libuv1-dev:ARCH): a loader and
# a libc.so.6 of two glibc builds hang together.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm -L /usr/arm-linux-gnueabihf
    -E LD_LIBRARY_PATH=/usr/arm-linux-gnueabihf/lib)
