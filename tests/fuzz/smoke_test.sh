#!/usr/bin/env bash
# The fuzz smoke test (CTest Fuzz.Smoke, label fuzz): configures a clang build with MOESIM_FUZZ=ON
# in FUZZ_BUILD_DIR, builds only the fuzz targets and the libraries they link, and runs each target
# for SECONDS (run_fuzzer.sh). Skips with exit status 77 where clang or its libFuzzer runtime is
# missing; fails on a finding.
#
#   smoke_test.sh SOURCE_DIR FUZZ_BUILD_DIR SECONDS [CMAKE_GENERATOR] [COMPILER_LAUNCHER]
set -euo pipefail
src=$1 build=$2 seconds=$3 generator=${4:-Ninja} launcher=${5:-}

cxx=""
for candidate in clang++ clang++-{20..14}; do
  if command -v "$candidate" >/dev/null; then cxx=$(command -v "$candidate"); break; fi
done
if [ -z "$cxx" ]; then
  echo "SKIP: no clang++ on PATH. The fuzz smoke test needs clang and its libFuzzer runtime" \
       "(Debian: apt-get install clang libclang-rt-dev; .ci/install-deps installs them)."
  exit 77
fi
cc=$(dirname "$cxx")/$(basename "$cxx" | sed 's/clang++/clang/')

mkdir -p "$build"
probe=$build/libfuzzer-probe
printf '%s\n' 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe.cc"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe.cc" -o "$probe" 2>"$probe.log"; then
  echo "SKIP: $cxx cannot link -fsanitize=fuzzer,address,undefined: the libFuzzer or sanitizer runtime" \
       "is missing (Debian: apt-get install libclang-rt-dev). The compiler said:"
  cat "$probe.log"
  exit 77
fi

start=$(date +%s)
configure=(cmake -S "$src" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo
           -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DMOESIM_FUZZ=ON
           -DMOESIM_WITH_CUDA=OFF -DMOESIM_WITH_MPI=OFF -DMOESIM_BUILD_TESTS=OFF -DMOESIM_BUILD_BENCH=OFF)
[ -n "$launcher" ] && configure+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
if ! "${configure[@]}" >"$build/configure.log" 2>&1 || ! cmake --build "$build" --target moesim_fuzz -j2 >"$build/build.log" 2>&1; then
  echo "the clang fuzz build failed:"
  tail -n 40 "$build/configure.log" "$build/build.log" 2>/dev/null
  exit 1
fi
echo "clang fuzz build ($cxx) ready in $(( $(date +%s) - start )) s"

failed=()
for target in yaml_loaders graph_json nccl_tests_log; do
  bash "$src/tests/fuzz/run_fuzzer.sh" "$build" "$target" "$seconds" || failed+=("$target")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "findings in: ${failed[*]} (docs/fuzzing.md says what to do with one)"
  exit 1
fi
