# Installs headers, libcrown, a CMake package (find_package(crown) -> crown::crown)
# and a pkg-config file (crown.pc).
include(CMakePackageConfigHelpers)
set(CROWN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/crown)

install(TARGETS crown EXPORT crownTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/crown DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/crown/build_config.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/crown)
install(EXPORT crownTargets NAMESPACE crown:: DESTINATION ${CROWN_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/crownConfig.cmake.in
  ${PROJECT_BINARY_DIR}/crownConfig.cmake INSTALL_DESTINATION ${CROWN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/crownConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/crownConfig.cmake ${PROJECT_BINARY_DIR}/crownConfigVersion.cmake
        DESTINATION ${CROWN_CMAKE_DIR})

# The .pc file finds its prefix relative to itself, so the tree can be relocated.
file(RELATIVE_PATH CROWN_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(${PROJECT_SOURCE_DIR}/cmake/crown.pc.in ${PROJECT_BINARY_DIR}/crown.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/crown.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET crown_fortran) # gfortran builds: gfortran prog.f90 $(pkg-config --cflags --libs crown-fortran)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/crown-fortran.pc.in ${PROJECT_BINARY_DIR}/crown-fortran.pc
                 @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/crown-fortran.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
