# SPDX-License-Identifier: MIT
# 64-bit Windows with MinGW-w64 (Debian's gcc-mingw-w64-x86-64), run under
# wine (Debian's wine and wine64):
#   cmake -S . -B build-mingw \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/x86_64-w64-mingw32.cmake \
#         -DCMAKE_PREFIX_PATH=<a libuv built with this same file>
# Wine keeps its state in WINEPREFIX, here inside the build tree, so that
# nothing is written to the home directory; WINEPATH lets the programs find
# the DLLs (uvtw's, at the top of the build tree, and libuv's, in the bin/
# of each CMAKE_PREFIX_PATH entry).  The first start of a new prefix takes
# some seconds.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
# libgcc is linked statically, so that the programs need no DLL of the
# compiler's.
set(CMAKE_EXE_LINKER_FLAGS_INIT -static-libgcc)
set(CMAKE_SHARED_LINKER_FLAGS_INIT -static-libgcc)

set(uvtw_dll_dirs ${CMAKE_BINARY_DIR})
# The compiler's own runtime DLL, for programs that use pthreads directly
# (some tests do; the libraries do not).
execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libwinpthread-1.dll
                OUTPUT_VARIABLE uvtw_winpthread
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(IS_ABSOLUTE "${uvtw_winpthread}")
  get_filename_component(uvtw_winpthread ${uvtw_winpthread} REALPATH)
  get_filename_component(uvtw_winpthread ${uvtw_winpthread} DIRECTORY)
  list(APPEND uvtw_dll_dirs ${uvtw_winpthread})
endif()
foreach(prefix ${CMAKE_PREFIX_PATH})
  list(APPEND uvtw_dll_dirs ${prefix}/bin)
endforeach()
list(JOIN uvtw_dll_dirs ":" uvtw_dll_dirs)
set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/wine-run.sh
    ${CMAKE_BINARY_DIR}/wineprefix ${uvtw_dll_dirs})
