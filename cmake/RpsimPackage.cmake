# `cmake --install` installs the headers, the libraries, the rpsim command and a
# CMake package, so that another project can
#   find_package(rpsim REQUIRED)
#   target_link_libraries(app PRIVATE rpsim::formats)   # or rpsim::accumulation, rpsim::train, ...
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)
set(RPSIM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/rpsim)
install(TARGETS ${RPSIM_EXPORTED_TARGETS} rpsim_warnings EXPORT rpsimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT rpsimTargets NAMESPACE rpsim:: DESTINATION ${RPSIM_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rpsimConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/rpsimConfig.cmake INSTALL_DESTINATION ${RPSIM_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rpsimConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rpsimConfig.cmake ${PROJECT_BINARY_DIR}/rpsimConfigVersion.cmake
        DESTINATION ${RPSIM_INSTALL_CMAKEDIR})
