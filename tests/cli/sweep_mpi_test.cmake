# Runs one sweep under `mpiexec -np 2` and as a single process and requires byte-identical CSVs.
# Arguments: -DMOESIM=<binary> -DMPIEXEC=<mpiexec> -DSOURCE=<repo root> -DWORK=<scratch dir>.
# Exits with 77 (CTest SKIP_RETURN_CODE) when no MPI launcher is available.
include(${CMAKE_CURRENT_LIST_DIR}/../mpi_launcher.cmake)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(grid --model models/moe-gpt-s-64e.yaml,models/moe-bert-l-64e.yaml
         --hardware hardware/clusters/dgx-a100-2node.yaml --gpus 8,16 --tokens 1024,2048,4096
         --chunks 1-8 --strategies none,s1,s4 --step-target-ms 2)
execute_process(COMMAND "${MOESIM}" sweep ${grid} --jobs 1 --csv "${WORK}/single.csv" --html "${WORK}/single.html"
                WORKING_DIRECTORY "${SOURCE}" RESULT_VARIABLE rc_single)
execute_process(COMMAND "${MPIEXEC}" ${MPIEXEC_FLAGS} -np 2 "${MOESIM}" sweep ${grid} --jobs 1 --csv "${WORK}/mpi.csv"
                        --html "${WORK}/mpi.html"
                WORKING_DIRECTORY "${SOURCE}" RESULT_VARIABLE rc_mpi)
if(NOT rc_single EQUAL 0 OR NOT rc_mpi EQUAL 0)
  message(FATAL_ERROR "sweep failed: single process exit ${rc_single}, mpiexec exit ${rc_mpi}")
endif()
foreach(ext csv html)
  file(READ "${WORK}/single.${ext}" a)
  file(READ "${WORK}/mpi.${ext}" b)
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "the ${ext} of the 2-rank sweep differs from the single process's")
  endif()
endforeach()
string(LENGTH "${a}" length)
message("2-rank and single-process outputs identical (${length} bytes of HTML)")
