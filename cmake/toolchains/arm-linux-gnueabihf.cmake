# SPDX-License-Identifier: MIT
# 32-bit Arm Linux (armv7, hard float) with Debian's cross compiler
# (gcc-arm-linux-gnueabihf), run under qemu-user (package qemu-user), which
# is invoked for each program: no binfmt_misc registration is needed.
#   cmake -S . -B build-armhf \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm-linux-gnueabihf.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7l)
set(CMAKE_C_COMPILER arm-linux-gnueabihf-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm -L /usr/arm-linux-gnueabihf)
