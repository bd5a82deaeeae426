# Warning and sanitizer flags shared by every Crown target (not exported to consumers).
add_library(crown_build_flags INTERFACE)
target_compile_options(crown_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wpedantic>
  $<$<AND:$<BOOL:${CROWN_WARNINGS_AS_ERRORS}>,$<COMPILE_LANGUAGE:C,CXX>>:-Werror>)
if(CROWN_SANITIZE)
  target_compile_options(crown_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:C,CXX,Fortran>:-fsanitize=${CROWN_SANITIZE} -fno-sanitize-recover=all
    -fno-omit-frame-pointer>)
  target_link_options(crown_build_flags INTERFACE -fsanitize=${CROWN_SANITIZE})
  if(CROWN_SANITIZE MATCHES "thread")
    # TSan does not model the fences that order stores into the shared heap between
    # processes (g++ warns on each); they are not what the thread checks look at.
    target_compile_options(crown_build_flags INTERFACE
      $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-tsan>)
  endif()
endif()
