# FindNCCL: NCCL ships no CMake config; this gives the imported target NCCL::nccl.
#
# Search order: NCCL_ROOT, $NCCL_HOME, the CUDA toolkit's directories, $CUDA_HOME, system paths.
# NAMES_PER_DIR keeps the header and the library from the same install; libnccl.so.2 is listed
# because pip wheels ship no plain libnccl.so. nccl.h includes cuda_runtime.h, hence the interface
# dependency on CUDA::toolkit. Sets NCCL_FOUND and NCCL_VERSION (from nccl.h).
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR} $ENV{CUDA_HOME})
find_path(NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
             HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${part} +([0-9]+)" _ "${_nccl_version_lines}")
    set(_nccl_${part} "${CMAKE_MATCH_1}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  target_link_libraries(NCCL::nccl INTERFACE CUDA::toolkit)
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
