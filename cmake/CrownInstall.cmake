# Installs headers, libcrown, a CMake package (find_package(crown) -> crown::crown),
# a pkg-config file (crown.pc) and the licence (share/doc/crown/LICENSE).
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
              ${PROJECT_SOURCE_DIR}/cmake/CrownFindCereal.cmake
        DESTINATION ${CROWN_CMAKE_DIR})
# DOCDIR would name the top-level project when Crown is a subproject.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/crown)

# crown.pc requires the pkg-config module of the MPI that CMake found, for its C library:
# Crown calls MPI's C interface. The define keeps mpi.h, read by C++, from declaring the
# deprecated C++ bindings, whose library (Open MPI's ompi-cxx) is then not needed.
function(crown_mpi_pc_module module_var cflags_var)
  set(version "${MPI_C_LIBRARY_VERSION_STRING}")
  set(module "")
  set(cflags -DMPICH_SKIP_MPICXX)
  if(version MATCHES "^Open MPI")
    set(module ompi-c)
    set(cflags -DOMPI_SKIP_MPICXX)
  elseif(version MATCHES "^MVAPICH")
    set(module mvapich2)
  elseif(version MATCHES "^Intel")
    set(module impi)
  elseif(version MATCHES "^MPICH")
    set(module mpich)
  endif()
  if(module)
    pkg_check_modules(crown_pc_mpi QUIET ${module})
  endif()
  if(NOT crown_pc_mpi_FOUND)
    message(WARNING "crown.pc names no MPI: no pkg-config module '${module}' found for "
                    "'${version}'; pkg-config users must add MPI's flags themselves")
    set(module "")
  endif()
  set(${module_var} "${module}" PARENT_SCOPE)
  set(${cflags_var} "${cflags}" PARENT_SCOPE)
endfunction()
crown_mpi_pc_module(CROWN_PC_MPI CROWN_PC_MPI_CFLAGS)

# cereal has no pkg-config module: its include directory goes into Cflags unless the
# compiler searches it anyway (-I/usr/include would reorder the system headers).
get_target_property(cereal_include_dirs cereal::cereal INTERFACE_INCLUDE_DIRECTORIES)
set(CROWN_PC_CEREAL_CFLAGS "")
foreach(dir IN LISTS cereal_include_dirs)
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    string(APPEND CROWN_PC_CEREAL_CFLAGS " -I${dir}")
  endif()
endforeach()

# The .pc file finds its prefix relative to itself, so the tree can be relocated.
file(RELATIVE_PATH CROWN_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(${PROJECT_SOURCE_DIR}/cmake/crown.pc.in ${PROJECT_BINARY_DIR}/crown.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/crown.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET crown_fortran) # gfortran builds: gfortran prog.f90 $(pkg-config --cflags --libs crown-fortran)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/crown-fortran.pc.in ${PROJECT_BINARY_DIR}/crown-fortran.pc
                 @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/crown-fortran.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
