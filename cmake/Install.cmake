# SPDX-License-Identifier: MIT
# install(): the header, both libraries, a CMake package (find_package(uvtw)
# gives uvtw::uvtw and uvtw::uvtw_static) and uvtw.pc.
#
# Two install components, one per Debian package (cmake/Package.cmake):
# "runtime" is libuvtw.so.N and its real file, "dev" is everything a build
# needs (header, libuvtw.so link, static library, CMake package, uvtw.pc).
include(CMakePackageConfigHelpers)

install(FILES include/uvtw.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev)
install(TARGETS uvtw uvtw_static EXPORT uvtwTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
                COMPONENT runtime NAMELINK_COMPONENT dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(UVTW_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/uvtw)
install(EXPORT uvtwTargets NAMESPACE uvtw:: DESTINATION ${UVTW_CMAKE_DIR}
        COMPONENT dev)
configure_package_config_file(cmake/uvtwConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/uvtwConfig.cmake
    INSTALL_DESTINATION ${UVTW_CMAKE_DIR})
write_basic_package_version_file(
    ${CMAKE_CURRENT_BINARY_DIR}/uvtwConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/uvtwConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/uvtwConfigVersion.cmake
              cmake/uvtwLibuv.cmake
        DESTINATION ${UVTW_CMAKE_DIR} COMPONENT dev)

# Relocatable: the prefix is found from the .pc file's own place, so
# `cmake --install --prefix ANY` gives a working uvtw.pc.
file(RELATIVE_PATH UVTW_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(cmake/uvtw.pc.in ${CMAKE_CURRENT_BINARY_DIR}/uvtw.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/uvtw.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
