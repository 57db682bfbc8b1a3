# SPDX-License-Identifier: MIT
# 32-bit x86 Linux with Debian's cross compiler (gcc-i686-linux-gnu):
#   cmake -S . -B build-i686 \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/i686-linux-gnu.cmake
# The programs run natively, on the x86-64 kernel.  Debian puts the cross
# C library in /usr/i686-linux-gnu, not at the /lib/ld-linux.so.2 that the
# binaries name (that takes libc6:i386, a second dpkg architecture), so
# they are started through that library's dynamic loader: no emulation.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR i686)
set(CMAKE_C_COMPILER i686-linux-gnu-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR
    /usr/i686-linux-gnu/lib/ld-linux.so.2
    --library-path /usr/i686-linux-gnu/lib)
# GCC notes at each internal structure with a 64-bit _Atomic field that
# GCC 11 changed its alignment on i386 (-Wpsabi).  None is in uvtw.h, and
# the library is built by one compiler: the notes concern no interface.
set(CMAKE_C_FLAGS_INIT -Wno-psabi)
