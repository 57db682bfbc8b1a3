# SPDX-License-Identifier: MIT
# CPack: `cpack -G DEB` in a build tree configured with
# -DCMAKE_INSTALL_PREFIX=/usr (so that GNUInstallDirs picks Debian's
# multiarch libdir, lib/<triplet>) makes the two Debian packages:
#
#   libuvtw0     the shared library, libuvtw.so.0 (SONAME) and its real file
#   libuvtw-dev  the header, libuvtw.so, libuvtw.a, the CMake package and
#                uvtw.pc; it depends on exactly this version of libuvtw0
#
# Dependencies are declared here, not computed by dpkg-shlibdeps; the test
# test/package-deb.sh checks them against what dpkg-shlibdeps finds.  The
# names are Debian 12's.
set(CPACK_PACKAGE_NAME uvtw)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "the uvtw authors" CACHE STRING
    "Maintainer field of the packages: \"Name <email>\"")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_STRIP_FILES ON)

set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(uvtw_deb_version ${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE})
# CPack puts the project's DESCRIPTION first, as the summary line; it
# indents the rest and turns an empty line into " .".
set(uvtw_deb_about "uvtw gives a libuv event loop a hierarchical timing wheel:
loop-thread timers that behave like uv_timer_t at O(1) cost, and tasks
that other threads submit and cancel without locks.
")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libuvtw${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libc6 (>= 2.3), libuv1 (>= 1.44)")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "${uvtw_deb_about}
This package contains the shared library.")
# A shlibs file (so that dpkg-shlibdeps finds libuvtw0 for programs linked
# with it) and ldconfig in postinst/postrm.  Both need `file` and `readelf`.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libuvtw-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libuvtw${PROJECT_VERSION_MAJOR} (= ${uvtw_deb_version})"
    "libuv1-dev (>= 1.44)")
list(JOIN CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", " CPACK_DEBIAN_DEV_PACKAGE_DEPENDS)
# find_package(uvtw) finds Debian's libuv (which has no CMake package)
# through pkg-config, as uvtw.pc users do.
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS pkg-config)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "${uvtw_deb_about}
This package contains the header, the static library, the CMake package
(find_package(uvtw)) and uvtw.pc for pkg-config.")

include(CPack)
