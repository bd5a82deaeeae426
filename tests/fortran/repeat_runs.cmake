# Runs `mpirun -np NP PROGRAM <case>` $ENV{REPEAT} times, ARGS being PROGRAM|case|case...
# (the cases in turn); every run must exit 0 and print EXPECT. For races that show in
# some runs only (crown_app_test(... SCRIPT this ENV REPEAT=n)).
string(REPLACE "|" ";" args "${ARGS}")
list(POP_FRONT args program)
list(LENGTH args cases)
foreach(run RANGE 1 $ENV{REPEAT})
  math(EXPR which "${run} % ${cases}")
  list(GET args ${which} case)
  execute_process(COMMAND ${MPIEXEC} -np ${NP} --oversubscribe ${program} ${case}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 60)
  if(NOT rc EQUAL 0 OR NOT "${out}${err}" MATCHES "${EXPECT}")
    message(FATAL_ERROR "run ${run} of $ENV{REPEAT} (${case}): exit status ${rc}; output:\n"
                        "${out}${err}")
  endif()
endforeach()
message(STATUS "$ENV{REPEAT} runs of ${args} in turn at ${NP} ranks passed")
