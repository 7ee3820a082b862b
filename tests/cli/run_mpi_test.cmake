# `mpiexec -np 2 moesim run` with a bad option: the error is printed once (by rank 0), not by
# every process, and the job exits non-zero. Arguments: -DMOESIM=<binary> -DMPIEXEC=<mpiexec>
# -DSOURCE=<repo root>. Exits with 77 (CTest SKIP_RETURN_CODE) when no MPI launcher is available.
include(${CMAKE_CURRENT_LIST_DIR}/../mpi_launcher.cmake)
execute_process(COMMAND "${MPIEXEC}" ${MPIEXEC_FLAGS} -np 2 "${MOESIM}" run --model models/moe-gpt-s-64e.yaml
                        --hardware hardware/clusters/adira-8x-dgx-a100.yaml --tokens 256 --strategy s7
                WORKING_DIRECTORY "${SOURCE}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "a bad --strategy under mpiexec exited 0")
endif()
string(REGEX MATCHALL "error: --strategy: unknown value 's7'" said "${err}${out}")
list(LENGTH said times)
if(NOT times EQUAL 1)
  message(FATAL_ERROR "the error was printed ${times} times, expected once:\n${err}${out}")
endif()
message("one error line from 2 processes, exit ${rc}")
