# Third-party dependencies, all from Debian packages (see README).

# yaml-cpp: Debian's config exports only the shared library, but a PIC static archive ships beside
# it; linking it statically keeps the binaries runnable where yaml-cpp is not installed.
find_package(yaml-cpp REQUIRED)
find_library(MOESIM_YAML_CPP_STATIC NAMES libyaml-cpp.a)
if(MOESIM_YAML_CPP_STATIC)
  add_library(moesim_yaml_cpp STATIC IMPORTED GLOBAL)
  set_target_properties(moesim_yaml_cpp PROPERTIES IMPORTED_LOCATION "${MOESIM_YAML_CPP_STATIC}")
  target_include_directories(moesim_yaml_cpp INTERFACE ${YAML_CPP_INCLUDE_DIR})
else()
  add_library(moesim_yaml_cpp INTERFACE IMPORTED GLOBAL)
  if(TARGET yaml-cpp::yaml-cpp)
    target_link_libraries(moesim_yaml_cpp INTERFACE yaml-cpp::yaml-cpp)
  else()
    target_link_libraries(moesim_yaml_cpp INTERFACE yaml-cpp)
  endif()
endif()

# Boost.Graph is header-only for our use; COMPONENTS graph would drag in regex and ICU.
find_package(Boost 1.74 REQUIRED CONFIG)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)

if(MOESIM_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MOESIM_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# MPI is optional: the default multi-GPU path is one process driving all local GPUs.
set(MOESIM_HAVE_MPI OFF)
if(NOT MOESIM_WITH_MPI STREQUAL "OFF")
  set(OMPI_SKIP_MPICXX 1)
  set(MPICH_SKIP_MPICXX 1)
  if(MOESIM_WITH_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI QUIET COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(MOESIM_HAVE_MPI ON)
  endif()
endif()
message(STATUS "moesim: MPI support ${MOESIM_HAVE_MPI} (MOESIM_WITH_MPI=${MOESIM_WITH_MPI})")
