# Where Crown installs, and how installed binaries find their libraries without
# LD_LIBRARY_PATH: a RUNPATH relative to the binary (so the tree can move) plus the
# directories outside the system's that the link used (CUDA, NCCL, a module's MPI).
# RUNPATH, not RPATH: LD_LIBRARY_PATH still overrides it.
include(GNUInstallDirs)
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
file(RELATIVE_PATH crown_bindir_to_libdir /${CMAKE_INSTALL_BINDIR} /${CMAKE_INSTALL_LIBDIR})

# crown_install_programs(<target>...): installs programs into bin/, finding libcrown in
# the install tree's lib/.
function(crown_install_programs)
  set_target_properties(${ARGN} PROPERTIES INSTALL_RPATH "$ORIGIN/${crown_bindir_to_libdir}")
  foreach(program IN LISTS ARGN)
    target_link_options(${program} PRIVATE LINKER:--enable-new-dtags)
  endforeach()
  install(TARGETS ${ARGN} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()
