# Runs sweeps under `mpiexec -np 2` and as a single process and requires byte-identical outputs: an
# expert-parallel grid, and a grid of tensor x expert layouts at global batches with the gradient
# all-reduces and ZeRO-1 (its layout columns come from the plan every rank prepares, not from the
# gathered outcomes).
# Arguments: -DMOESIM=<binary> -DMPIEXEC=<mpiexec> -DSOURCE=<repo root> -DWORK=<scratch dir>.
# Exits with 77 (CTest SKIP_RETURN_CODE) when no MPI launcher is available.
include(${CMAKE_CURRENT_LIST_DIR}/../mpi_launcher.cmake)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(grid_ep --model models/moe-gpt-s-64e.yaml,models/moe-bert-l-64e.yaml
            --hardware hardware/clusters/dgx-a100-2node.yaml --gpus 8,16 --tokens 1024,2048,4096
            --chunks 1-8 --strategies none,s1,s4 --step-target-ms 2)
set(grid_ted --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml --gpus 8,16
             --global-tokens 32768,65536 --tp 1,2,4 --chunks 1,2 --strategies none,s4 --grad-sync --zero 1)
foreach(name ep ted)
  execute_process(COMMAND "${MOESIM}" sweep ${grid_${name}} --jobs 1 --csv "${WORK}/${name}-single.csv"
                          --html "${WORK}/${name}-single.html" --json "${WORK}/${name}-single.json"
                  WORKING_DIRECTORY "${SOURCE}" RESULT_VARIABLE rc_single)
  execute_process(COMMAND "${MPIEXEC}" ${MPIEXEC_FLAGS} -np 2 "${MOESIM}" sweep ${grid_${name}} --jobs 1
                          --csv "${WORK}/${name}-mpi.csv" --html "${WORK}/${name}-mpi.html"
                          --json "${WORK}/${name}-mpi.json"
                  WORKING_DIRECTORY "${SOURCE}" RESULT_VARIABLE rc_mpi)
  if(NOT rc_single EQUAL 0 OR NOT rc_mpi EQUAL 0)
    message(FATAL_ERROR "the ${name} sweep failed: single process exit ${rc_single}, mpiexec exit ${rc_mpi}")
  endif()
  foreach(ext csv html json)
    file(READ "${WORK}/${name}-single.${ext}" a)
    file(READ "${WORK}/${name}-mpi.${ext}" b)
    if(NOT a STREQUAL b)
      message(FATAL_ERROR "the ${ext} of the 2-rank ${name} sweep differs from the single process's")
    endif()
  endforeach()
  string(LENGTH "${a}" length)
  message("${name}: 2-rank and single-process outputs identical (${length} bytes of JSON)")
endforeach()
