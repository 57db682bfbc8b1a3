# SPDX-License-Identifier: MIT
# Defines the INTERFACE target uvtw_libuv for libuv >= 1.44.
# Debian's libuv1-dev ships only libuv.pc, so pkg-config is the fallback.
# uvtwConfig.cmake includes this file too, so consumers find libuv the same way.
if(NOT TARGET uvtw_libuv)
  find_package(libuv 1.44 CONFIG QUIET)
  add_library(uvtw_libuv INTERFACE IMPORTED)
  if(TARGET libuv::uv)
    target_link_libraries(uvtw_libuv INTERFACE libuv::uv)
  elseif(TARGET uv)
    target_link_libraries(uvtw_libuv INTERFACE uv)
  else()
    find_package(PkgConfig REQUIRED)
    pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv>=1.44)
    target_link_libraries(uvtw_libuv INTERFACE PkgConfig::LIBUV)
  endif()
endif()
