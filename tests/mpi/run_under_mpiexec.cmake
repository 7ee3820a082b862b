# Runs a test program under `mpiexec -np NP`. Arguments: -DTEST=<binary> -DMPIEXEC=<mpiexec> -DNP=<n>.
# Exits with 77 (CTest SKIP_RETURN_CODE) when no MPI launcher is available.
include(${CMAKE_CURRENT_LIST_DIR}/../mpi_launcher.cmake)
execute_process(COMMAND "${MPIEXEC}" ${MPIEXEC_FLAGS} -np ${NP} "${TEST}" RESULT_VARIABLE rc)
if(rc EQUAL 77)
  cmake_language(EXIT 77)
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TEST} under ${MPIEXEC} -np ${NP} exited with ${rc}")
endif()
