# SPDX-License-Identifier: MIT
# 32-bit x86 Linux with Debian's cross compiler (gcc-i686-linux-gnu):
#   cmake -S . -B build-i686 \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/i686-linux-gnu.cmake
# The programs run natively on an x86-64 kernel with IA-32 emulation.
# Debian puts the cross C library in /usr/i686-linux-gnu, not at the
# /lib/ld-linux.so.2 that the binaries name (that takes libc6:i386, a
# second dpkg architecture), so they are started through that library's
# dynamic loader: no emulation.  A kernel without IA-32 emulation cannot
# start that loader ("Exec format error"); the programs then run under
# qemu-i386 (package qemu-user), and CMake says so.  qemu-i386 runs the
# same loader as its program: with qemu's own "-L /usr/i686-linux-gnu"
# instead, Debian 12's qemu 7.2 hangs any dynamically linked i386 program
# in its first pthread_create.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR i686)
set(CMAKE_C_COMPILER i686-linux-gnu-gcc)
set(uvtw_i686_loader /usr/i686-linux-gnu/lib/ld-linux.so.2)
execute_process(COMMAND ${uvtw_i686_loader} --version
                RESULT_VARIABLE uvtw_i686_native OUTPUT_QUIET ERROR_QUIET)
if(uvtw_i686_native EQUAL 0)
  set(CMAKE_CROSSCOMPILING_EMULATOR
      ${uvtw_i686_loader} --library-path /usr/i686-linux-gnu/lib)
else()
  if(NOT uvtw_i686_said)
    message(STATUS "This kernel does not run i386 programs: "
                   "they run under qemu-i386")
    set(uvtw_i686_said 1)
  endif()
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-i386
      ${uvtw_i686_loader} --library-path /usr/i686-linux-gnu/lib)
endif()
# GCC notes at each internal structure with a 64-bit _Atomic field that
# GCC 11 changed its alignment on i386 (-Wpsabi).  None is in uvtw.h, and
# the library is built by one compiler: the notes concern no interface.
set(CMAKE_C_FLAGS_INIT -Wno-psabi)
