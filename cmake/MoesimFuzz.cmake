# MOESIM_FUZZ=ON: a build of the libFuzzer targets of tests/fuzz (docs/fuzzing.md). Everything is
# compiled with libFuzzer's coverage instrumentation, AddressSanitizer and UndefinedBehaviorSanitizer
# (an undefined-behaviour report aborts, so the fuzzer keeps the input); the targets link libFuzzer.
# It needs clang, whose runtime libraries carry libFuzzer: a GCC build cannot have it.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR
    "MOESIM_FUZZ=ON needs clang (libFuzzer comes with clang's runtime libraries), but the C++ compiler is "
    "${CMAKE_CXX_COMPILER_ID} (${CMAKE_CXX_COMPILER}). Configure a separate build folder with "
    "-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ (Debian: apt-get install clang libclang-rt-dev).")
endif()

set(MOESIM_FUZZ_SANITIZERS address,undefined)
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,${MOESIM_FUZZ_SANITIZERS}")
set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=fuzzer,${MOESIM_FUZZ_SANITIZERS}")
check_cxx_source_compiles([[
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }
]] MOESIM_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NOT MOESIM_HAVE_LIBFUZZER)
  message(FATAL_ERROR
    "MOESIM_FUZZ=ON: ${CMAKE_CXX_COMPILER} cannot link a program with -fsanitize=fuzzer,${MOESIM_FUZZ_SANITIZERS}; "
    "its libFuzzer or sanitizer runtime is missing (Debian: apt-get install libclang-rt-dev). "
    "See CMakeFiles/CMakeError.log for the compiler's message.")
endif()

# -O1 -g whatever the build type: the sanitizers' stacks stay readable, and the build takes a fifth
# less time than at -O2.
add_compile_options(-fsanitize=fuzzer-no-link,${MOESIM_FUZZ_SANITIZERS} -fno-sanitize-recover=all
                    -fno-omit-frame-pointer -O1 -g)
add_link_options(-fsanitize=${MOESIM_FUZZ_SANITIZERS})
message(STATUS "moesim: fuzz build (libFuzzer, ${MOESIM_FUZZ_SANITIZERS}); build the targets with --target moesim_fuzz")
