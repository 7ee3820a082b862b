# Included by the CTest scripts that start programs under mpiexec: exits with 77 (CTest
# SKIP_RETURN_CODE) when MPIEXEC names no launcher, and sets MPIEXEC_FLAGS to what the launcher
# needs on CI machines.
if(NOT MPIEXEC OR NOT EXISTS "${MPIEXEC}")
  message("mpiexec not found; skipping")
  cmake_language(EXIT 77)
endif()
execute_process(COMMAND "${MPIEXEC}" --version OUTPUT_VARIABLE version ERROR_VARIABLE version)
set(MPIEXEC_FLAGS)
if(version MATCHES "Open MPI|OpenRTE")
  # Open MPI refuses to run as root and to start more ranks than cores without these.
  set(MPIEXEC_FLAGS --allow-run-as-root --oversubscribe)
endif()
