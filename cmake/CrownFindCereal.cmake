# cereal, header-only and public (Crown's headers include it), as cereal::cereal: its
# CMake package where one is installed (Debian's libcereal-dev has one), else its headers
# wherever they are found (a prefix, CPATH). Included by Crown's build and installed
# beside crownConfig.cmake, which includes it too, so both find cereal the same way.
if(NOT TARGET cereal::cereal)
  find_package(cereal 1.3 CONFIG QUIET)
endif()
if(NOT TARGET cereal::cereal)
  find_path(CROWN_CEREAL_INCLUDE_DIR cereal/cereal.hpp HINTS ENV CPATH
            DOC "Directory holding cereal/cereal.hpp")
  if(CROWN_CEREAL_INCLUDE_DIR)
    add_library(cereal::cereal INTERFACE IMPORTED)
    set_target_properties(cereal::cereal PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${CROWN_CEREAL_INCLUDE_DIR}")
  endif()
endif()
