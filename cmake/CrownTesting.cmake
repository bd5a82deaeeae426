# Test registration helpers.
#
#   crown_add_suite(<suite> SOURCES <files...> [HARNESS runtime|mpi|none] [REQUIRES_GPU])
#     builds test_<suite>, a Boost.Test program linked with one of the harness mains:
#       runtime (default) the harness initialises MPI and constructs crown::runtime;
#       mpi               the harness initialises MPI (thread level from CROWNTEST_THREAD_LEVEL),
#                         the tests construct crown::runtime themselves;
#       none              the tests own MPI entirely (runtime start/finalize tests).
#     Every rank buffers its Boost.Test output and prints it only if it failed; rank 0
#     prints one summary line; the program fails if any rank failed.
#   crown_run_suite(<suite> [VARIANT <name>] [NP <counts...>] [ENV <VAR=value...>]
#                   [LABELS <labels...>] [TIMEOUT <seconds>] [ARGS <test arguments...>]
#                   [PASS_REGEX <regex>] [FAIL_REGEX <regex>])
#     registers <suite>[.<variant>].np<N> for each N (default 1 2 3 4) under
#     mpirun -np N --oversubscribe, with a timeout (default 60 s) and PROCESSORS N.
#     ARGS go to the test program (e.g. --run_test=<case>); PASS_REGEX: the test passes
#     when its output matches, whatever its exit code (a job that must end itself,
#     naming a cause), unless FAIL_REGEX matches too.
#   crown_add_unit_test(<suite> SOURCES <files...>): a single-process test, label unit.

set(CROWN_TEST_ENV
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
  OMP_NUM_THREADS=1)
if(CROWN_SANITIZE MATCHES "thread")
  # Reports go to stderr and fail the test (exit 66); Open MPI and UCX are not
  # instrumented, their internals are suppressed (cmake/tsan.supp). UCX's memory hooks
  # (libucm's madvise/munmap interposers, reached directly or through Open MPI's memory
  # patcher) crash inside TSan's own interceptors: both are switched off.
  list(APPEND CROWN_TEST_ENV OMPI_MCA_mca_base_component_disable_dlclose=1
    UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_DYNAMIC_MMAP_THRESH=no
    OMPI_MCA_memory=^patcher
    "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/cmake/tsan.supp:second_deadlock_stack=1:history_size=4")
elseif(CROWN_SANITIZE)
  # Open MPI unloads its plugins at finalize, which leaves leak reports without a
  # module name to suppress by; keeping them loaded makes the suppressions apply.
  list(APPEND CROWN_TEST_ENV OMPI_MCA_mca_base_component_disable_dlclose=1
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/cmake/lsan.supp:print_suppressions=0"
    "ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:protect_shadow_gap=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endif()

function(crown_add_suite suite)
  cmake_parse_arguments(PARSE_ARGV 1 arg "REQUIRES_GPU" "HARNESS" "SOURCES")
  if(NOT arg_HARNESS)
    set(arg_HARNESS runtime)
  endif()
  add_executable(test_${suite} ${arg_SOURCES})
  target_link_libraries(test_${suite} PRIVATE crown_test_harness_${arg_HARNESS} crown::crown
                                              crown_build_flags)
  set_property(TARGET test_${suite} PROPERTY CROWN_REQUIRES_GPU ${arg_REQUIRES_GPU})
endfunction()

function(crown_run_suite suite)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "VARIANT;TIMEOUT;PASS_REGEX;FAIL_REGEX"
                        "NP;ENV;LABELS;ARGS")
  if(NOT arg_NP)
    set(arg_NP 1 2 3 4)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 60)
  endif()
  if(NOT arg_LABELS)
    set(arg_LABELS mpi)
  endif()
  get_property(requires_gpu TARGET test_${suite} PROPERTY CROWN_REQUIRES_GPU)
  if(requires_gpu)
    list(APPEND arg_ENV CROWNTEST_REQUIRES_GPU=1)
  endif()
  set(prefix ${suite})
  if(arg_VARIANT)
    set(prefix ${suite}.${arg_VARIANT})
  endif()
  foreach(np IN LISTS arg_NP)
    set(name ${prefix}.np${np})
    add_test(NAME ${name}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_${suite}> ${MPIEXEC_POSTFLAGS}
                     ${arg_ARGS})
    set_tests_properties(${name} PROPERTIES
      TIMEOUT ${arg_TIMEOUT} PROCESSORS ${np} LABELS "${arg_LABELS}"
      ENVIRONMENT "${CROWN_TEST_ENV};${arg_ENV}" SKIP_RETURN_CODE 77)
    if(arg_PASS_REGEX)
      set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${arg_PASS_REGEX}")
    endif()
    if(arg_FAIL_REGEX)
      set_tests_properties(${name} PROPERTIES FAIL_REGULAR_EXPRESSION "${arg_FAIL_REGEX}")
    endif()
  endforeach()
endfunction()

function(crown_add_unit_test suite)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES")
  add_executable(test_${suite} ${arg_SOURCES})
  target_link_libraries(test_${suite} PRIVATE crown_test_harness_none crown::crown
                                              crown_build_flags)
  add_test(NAME ${suite} COMMAND test_${suite})
  set_tests_properties(${suite} PROPERTIES TIMEOUT 60 LABELS unit PROCESSORS 1
                                           ENVIRONMENT "${CROWN_TEST_ENV}")
endfunction()
