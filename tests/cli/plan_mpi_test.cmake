# Runs `moesim plan` under `mpiexec -np 2` and `-np 3` and as a single process and requires
# byte-identical outputs (the text on stdout and the JSON): every method, several token counts
# (the online replay walks them in order) and --fit over 1-3 nodes (a step target none meets), whose
# node counts each spread their simulations over the ranks. Then a bad input under -np 2 must be reported once, with exit 2.
# Arguments: -DMOESIM=<binary> -DMPIEXEC=<mpiexec> -DSOURCE=<repo root> -DWORK=<scratch dir>.
# Exits with 77 (CTest SKIP_RETURN_CODE) when no MPI launcher is available.
include(${CMAKE_CURRENT_LIST_DIR}/../mpi_launcher.cmake)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(common plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml
           --tokens 1024,4096,2048,4096 --chunks 1-8 --method all --fit --max-nodes 3 --max-step-ms 0.3 --jobs 1)
set(plan_args ${common} --objective balanced)
execute_process(COMMAND "${MOESIM}" ${plan_args} --json "${WORK}/single.json"
                WORKING_DIRECTORY "${SOURCE}" RESULT_VARIABLE rc OUTPUT_FILE "${WORK}/single.txt")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the single-process plan failed with exit ${rc}")
endif()
file(READ "${WORK}/single.txt" text_single)
file(READ "${WORK}/single.json" json_single)
foreach(np 2 3)
  execute_process(COMMAND "${MPIEXEC}" ${MPIEXEC_FLAGS} -np ${np} "${MOESIM}" ${plan_args} --json "${WORK}/mpi${np}.json"
                  WORKING_DIRECTORY "${SOURCE}" RESULT_VARIABLE rc OUTPUT_FILE "${WORK}/mpi${np}.txt")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the plan under mpiexec -np ${np} failed with exit ${rc}")
  endif()
  file(READ "${WORK}/mpi${np}.txt" text)
  file(READ "${WORK}/mpi${np}.json" json)
  if(NOT text STREQUAL text_single)
    message(FATAL_ERROR "the text of the ${np}-rank plan differs from the single process's")
  endif()
  if(NOT json STREQUAL json_single)
    message(FATAL_ERROR "the JSON of the ${np}-rank plan differs from the single process's")
  endif()
endforeach()
string(LENGTH "${json_single}" length)
message("2- and 3-rank plans identical to the single process's (${length} bytes of JSON)")

execute_process(COMMAND "${MPIEXEC}" ${MPIEXEC_FLAGS} -np 2 "${MOESIM}" ${common} --objective fastest
                WORKING_DIRECTORY "${SOURCE}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
string(REGEX MATCHALL "error: --objective 'fastest' is not valid" said "${err}${out}")
list(LENGTH said times)
if(rc EQUAL 0 OR NOT times EQUAL 1)
  message(FATAL_ERROR "a bad --objective under -np 2: exit ${rc}, printed ${times} times (expected once):\n${err}${out}")
endif()
