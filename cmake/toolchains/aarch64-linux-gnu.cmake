# SPDX-License-Identifier: MIT
# 64-bit Arm Linux with Debian's cross compiler (gcc-aarch64-linux-gnu),
# run under qemu-user (package qemu-user), which is invoked for each
# program: no binfmt_misc registration is needed.
#   cmake -S . -B build-aarch64 \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
