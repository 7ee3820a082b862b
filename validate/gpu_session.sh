#!/usr/bin/env bash
# Every check of the GPU runtime that needs a GPU, for a session that is lent a GPU machine for a
# short time (docs/runtime.md, "On a GPU machine"). Two halves:
#
#   bash validate/gpu_session.sh build              # here (needs the build dependencies): dist/ to carry
#   bash validate/gpu_session.sh run [PHASE...]     # on the GPU machine, from the repository root
#
# Phases, run in the order given (default: tests calibrate measure, which fit one call; bench and
# sanitize take a call each):
#   tests      the GPU tests with MOESIM_REQUIRE_GPU=1 (numerics of every dtype, n and strategy,
#              bitwise equality, loopback and NCCL ranks, memory next to the prediction, the
#              out-of-memory message, the NCCL watchdog)
#   calibrate  `moesim calibrate` of this GPU, and of the all-to-all between its GPUs if it has several
#   measure    `moesim run` of each configuration, its simulation, and `moesim compare` of the two
#              (with the datasheet node, and with this GPU's calibration when there is one)
#   holdout    `moesim run` of configurations no model change was built from, simulated and
#              compared as in measure (the simulator judged out of sample; not by default)
#   bench      the layer against its GEMMs alone, plain PyTorch on the same GPU, PyTorch's host
#              time per launched kernel (validate/host_launch_probe.py), and GEMMs beside a
#              communication kernel (moesim_sm_share_probe; --shapes with gemm_kernel_probe.py)
#   sanitize   compute-sanitizer memcheck and initcheck over the small GPU tests (not by default)
#
# The device tool kills a command at its time limit (600 s, or less when the session's device
# time runs low) and returns at most 8 files, so a run keeps to a budget: each step gets at most
# the time left, a step that no longer fits is listed as skipped, and OUT only ever holds two
# files, summary.txt and gpu-results.tar.gz, the archive rewritten after every step (a kill loses
# only the step in flight). Environment:
#   OUT                 where summary.txt and gpu-results.tar.gz go (the device tool's $OUT; else ./out)
#   MOESIM_BUDGET_S     seconds for the whole run, packing included (default 560); set it below the
#                       call's timeout_s, itself no more than the device time left
#   MOESIM_DIST         the installed tree to run (default dist)
#   MOESIM_CALIBRATION  a calibration file for `measure` when `calibrate` is not in the same run
#                       (e.g. the one an earlier call measured, committed under hardware/calibration/)
#
# Each step's output is OUT/gpu-results/NAME.txt; summary.txt has one line per step (exit code,
# seconds, command). Results worth keeping are committed under validate/results/ with the command.
set -uo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  build)
    set -e
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOESIM_WERROR=ON -DMOESIM_WITH_CUDA=ON \
      -DMOESIM_WITH_MPI=OFF
    ninja -C build-gpu moesim moesim_runtime_tests moesim_moe_layer_gpu
    rm -rf dist
    cmake --install build-gpu --prefix dist --strip # the device tool carries 64 MiB with the tree
    du -sh dist
    exit 0
    ;;
  run) shift ;;
  *)
    echo "usage: $0 build | run [tests|calibrate|measure|holdout|bench|sanitize]..." >&2
    exit 2
    ;;
esac

phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(tests calibrate measure) # bench and sanitize: calls of their own
for p in "${phases[@]}"; do
  case "$p" in
    tests | calibrate | measure | holdout | bench | sanitize) ;;
    *)
      echo "$0: unknown phase '$p' (tests, calibrate, measure, holdout, bench, sanitize)" >&2
      exit 2
      ;;
  esac
done
budget=${MOESIM_BUDGET_S:-560}
if ! [[ "$budget" =~ ^[0-9]+$ ]]; then
  echo "$0: MOESIM_BUDGET_S must be a whole number of seconds, got '$budget'" >&2
  exit 2
fi
budget=$((10#$budget)) # 0560 is 560 s, not octal
cal=${MOESIM_CALIBRATION:-}
if [ -n "$cal" ] && [ ! -f "$cal" ]; then
  echo "$0: MOESIM_CALIBRATION names $cal, which does not exist" >&2
  exit 2
fi
dist=${MOESIM_DIST:-dist}
out=${OUT:-out}
mkdir -p "$out"
# The step outputs live outside OUT, so that OUT never holds more than the two files.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/moesim-gpu-session.XXXXXX")
work="$scratch/gpu-results"
mkdir -p "$work"
summary="$out/summary.txt"
: >"$summary"

pack_reserve=15 # seconds kept for packing the results
deadline=$((SECONDS + budget - pack_reserve))
pack() { # the archive is replaced whole (written aside, then renamed)
  tar -czf "$out/gpu-results.tar.gz.part" -C "$scratch" gpu-results && mv "$out/gpu-results.tar.gz.part" "$out/gpu-results.tar.gz"
}
finish() {
  pack
  rm -rf "$scratch"
  echo "wrote $summary and $out/gpu-results.tar.gz"
}
trap finish EXIT

export MOESIM_SOURCE_DIR=$PWD
# cuBLAS and NCCL come from the machine: the CUDA toolkit, or a PyTorch install's wheels.
# The toolkit's come first (the versions the build used), the wheels' only where it has none.
for d in /usr/local/cuda/lib64 $(timeout 30 python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null); do
  [ -d "$d" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
export LD_LIBRARY_PATH

# step NAME SECONDS COMMAND...: runs COMMAND for at most SECONDS (or what is left of the budget),
# output to $work/NAME.txt, one summary line. Exit 124 means it ran out of time.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - SECONDS))
  if [ "$left" -lt 5 ]; then
    local shown="$*"
    printf '%-28s skipped (budget spent)  %s\n' "$name" "${shown//$work\//RESULTS/}" | tee -a "$summary"
    return
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  local start=$SECONDS
  timeout -k 5 "$limit" "$@" >"$work/$name.txt" 2>&1
  local rc=$?
  local shown="$*"
  # The scratch folder is named RESULTS/ in the summary: recompare_gpu_results.sh re-runs these
  # commands against the committed results folder.
  printf '%-28s exit %3d  %4d s  %s\n' "$name" "$rc" "$((SECONDS - start))" "${shown//$work\//RESULTS/}" |
    tee -a "$summary"
  pack
}

moesim=$dist/bin/moesim
tests=$dist/bin/moesim_runtime_tests
model=models/moe-gpt-s-64e.yaml
# The node preset of the GPU the machine has (an H200 is not an H100 with more memory: HBM differs).
case "$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
  "NVIDIA H200"*) node=hardware/nodes/hgx-h200.yaml ;;
  *) node=hardware/nodes/hgx-h100.yaml ;;
esac

phase_tests() {
  # Correctness: every dtype x n in {1,2,4,8} x strategy against the CPU reference, bitwise
  # equality across strategies and transports, 64 experts over 8 loopback ranks, memory, the
  # out-of-memory message. The watchdog test aborts a hung NCCL kernel, so it runs on its own.
  # A stuck NCCL test must end in the watchdog's error well before the step's own limit.
  step runtime-tests 300 env MOESIM_REQUIRE_GPU=1 MOESIM_NCCL_TIMEOUT_S=30 "$tests" "--gtest_filter=-NcclWatchdog.*"
  step watchdog 60 env MOESIM_REQUIRE_GPU=1 "$tests" "--gtest_filter=NcclWatchdog.*"
}

phase_calibrate() {
  # Launch gap, HBM, PCIe and GEMM tables in the model's tf32, bf16 and fp32, so that each
  # measured run is compared with the datasheet prediction and with the calibrated one.
  step calibrate 200 "$moesim" calibrate --hardware $node --output "$work/calibration.yaml" --dtypes tf32,bf16,fp32
  if [ -s "$work/calibration.yaml" ]; then cal="$work/calibration.yaml"; fi
  # The intra-node all-to-all through NCCL, where there are two GPUs or more to measure it between.
  if [ "$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -ge 2 ]; then
    step calibrate-network 120 env MOESIM_NCCL_TIMEOUT_S=60 "$moesim" calibrate --hardware $node --collectives \
      --output "$work/network.yaml"
  fi
}

# NAME RANKS ARGS...: moesim run, moesim simulate of the same layer (every rank), moesim compare.
# The model and tokens are $model and 4,096 unless MEASURE_MODEL / MEASURE_TOKENS say otherwise.
measure_one() {
  local name=$1 ranks=$2
  shift 2
  local model=${MEASURE_MODEL:-$model} tokens=${MEASURE_TOKENS:-4096}
  step "run-$name" 90 "$moesim" run --model $model --hardware $node --tokens $tokens --ranks "$ranks" "$@" \
    --json "$work/run-$name.json" --trace "$work/run-$name-trace.json"
  local sim_args=()
  for a in "$@"; do [ "$a" != --check ] && sim_args+=("$a"); done # --loopback: simulate the same GPU sharing
  step "sim-$name" 30 "$moesim" simulate --model $model --hardware $node --tokens $tokens --ep "$ranks" --all-ranks \
    "${sim_args[@]}" --json "$work/sim-$name.json"
  step "compare-$name" 30 "$moesim" compare "$work/run-$name.json" "$work/sim-$name.json" --csv "$work/compare-$name.csv" \
    --json "$work/compare-$name.json"
  if [ -n "$cal" ]; then
    step "simcal-$name" 30 "$moesim" simulate --model $model --hardware $node --calibration "$cal" --tokens $tokens \
      --ep "$ranks" --all-ranks "${sim_args[@]}" --json "$work/simcal-$name.json"
    step "comparecal-$name" 30 "$moesim" compare "$work/run-$name.json" "$work/simcal-$name.json" \
      --csv "$work/comparecal-$name.csv" --json "$work/comparecal-$name.json"
  fi
}

# MoE-GPT-XL-16E in bf16 (the bench's dtype): a copy of the model file with both dtype keys set
# to bf16, written to the results (the simulate commands name it). Prints its path.
xl16_bf16_model() {
  local copy="$work/moe-gpt-xl-16e-bf16.yaml"
  sed -e 's/^dtype: .*/dtype: bf16/' -e 's/^gemm_precision: .*/gemm_precision: bf16/' models/moe-gpt-xl-16e.yaml >"$copy"
  echo "$copy"
}

phase_measure() {
  # In the model's own dtypes (fp32 storage, TF32 GEMMs) so that `moesim simulate` describes the
  # same layer. Most telling first: every strategy at n = 4 (checked against the reference), eight
  # virtual ranks sharing the GPU (simulated as a loopback node, docs/concepts.md), two layers,
  # then n = 1, 2, 8 without reuse.
  for s in none s1 s2 s3 s4; do measure_one "$s-n4" 1 --chunks 4 --strategy $s --check; done
  measure_one loopback8-s1-n4 8 --chunks 4 --strategy s1 --loopback --check
  measure_one layers2-s4-n4 1 --chunks 4 --strategy s4 --layers 2 --check
  for n in 1 2 8; do measure_one "none-n$n" 1 --chunks $n --strategy none; done
  # The batch size: MoE-GPT-S with a quarter and four times the tokens, n = 1 and 4.
  for t in 1024 16384; do
    for n in 1 4; do MEASURE_TOKENS=$t measure_one "t$t-none-n$n" 1 --chunks $n --strategy none; done
  done
  # A layer whose GEMMs dominate: MoE-GPT-XL-16E, 16,384 tokens on one GPU, in its own TF32 and in
  # bf16 (xl16_bf16_model).
  local xl=models/moe-gpt-xl-16e.yaml xl_bf16
  xl_bf16=$(xl16_bf16_model)
  for n in 1 4; do
    MEASURE_MODEL=$xl MEASURE_TOKENS=16384 measure_one "xl16-tf32-n$n" 1 --chunks $n --strategy none
    MEASURE_MODEL=$xl_bf16 MEASURE_TOKENS=16384 measure_one "xl16-bf16-n$n" 1 --chunks $n --strategy none
  done
}

phase_holdout() {
  # Configurations that no model change has been built from (the measure grid has been, call by
  # call): other token counts, chunk counts and strategies, four and two virtual ranks, four
  # layers, MoE-GPT-XL-16E in bf16 at half its tokens. Compared as measure compares.
  MEASURE_TOKENS=8192 measure_one holdout-t8192-s1-n2 1 --chunks 2 --strategy s1 --check
  MEASURE_TOKENS=2048 measure_one holdout-t2048-s3-n8 1 --chunks 8 --strategy s3 --check
  measure_one holdout-s2-n2 1 --chunks 2 --strategy s2 --check
  measure_one holdout-layers4-none-n2 1 --chunks 2 --strategy none --layers 4 --check
  measure_one holdout-loopback4-s4-n2 4 --chunks 2 --strategy s4 --loopback --check
  measure_one holdout-loopback2-none-n4 2 --chunks 4 --strategy none --loopback --check
  local xl_bf16
  xl_bf16=$(xl16_bf16_model)
  MEASURE_MODEL=$xl_bf16 MEASURE_TOKENS=8192 measure_one holdout-xl16-bf16-t8192-s4-n2 1 --chunks 2 --strategy s4
}

phase_bench() {
  # Speed: MoE-GPT-XL, 4 local experts, 16,384 tokens, bf16, n = 1, against its GEMMs alone
  # (target <= 1.25x), and the same layer in plain PyTorch on the same GPU.
  step bench-layer 240 "$dist/bin/moesim_moe_layer_gpu"
  step bench-torch 180 env PYTHONUNBUFFERED=1 python3 bench/moe_layer_torch.py
  # The host's time per launched kernel in PyTorch (what `simulate --host-launch-us` asks for).
  step bench-host-launch 120 env PYTHONUNBUFFERED=1 python3 validate/host_launch_probe.py
  # A few-CTA communication kernel beside GEMMs on another stream, at normal and high priority
  # (runtime/bench/sm_share_probe.h): what overlapping an all-to-all with computation costs.
  step bench-sm-share 120 "$dist/bin/moesim_sm_share_probe"
  step bench-sm-share-factors 120 "$dist/bin/moesim_sm_share_probe" --factors
  # The computation cell by GEMM shape, and the kernel cuBLAS runs for each shape.
  step bench-sm-share-shapes 120 "$dist/bin/moesim_sm_share_probe" --shapes --reps 9
  step bench-sm-share-waves 120 "$dist/bin/moesim_sm_share_probe" --waves --reps 9
  step bench-sm-share-batched 120 "$dist/bin/moesim_sm_share_probe" --batched --reps 9
  step bench-gemm-kernels 90 env PYTHONUNBUFFERED=1 python3 validate/gemm_kernel_probe.py
}

phase_sanitize() {
  # Out-of-bounds and uninitialised device reads in the kernels and the executor's buffers, on the
  # small tests (the sanitizer slows kernels down by one to two orders of magnitude).
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  step memcheck 200 env MOESIM_REQUIRE_GPU=1 "$sanitizer" --tool memcheck --error-exitcode 99 "$tests" \
    "--gtest_filter=KernelsGpu.*:LayerGpu.SharedExperts*:LayerGpu.StackedLayers*"
  step initcheck 60 env MOESIM_REQUIRE_GPU=1 "$sanitizer" --tool initcheck --error-exitcode 99 "$tests" \
    "--gtest_filter=KernelsGpu.*"
  # The layer's route kernel reads the gate GEMM's output, written by cuBLAS. On an H200 initcheck
  # reported those reads as uninitialised (the numerics matched the reference), and printing
  # thousands of such reports with backtraces ran past 150 s: a few, without backtraces, plus a
  # probe of whether initcheck sees cuBLAS's stores at all: the runtime's cuBLAS call on the
  # layer test's shapes in each dtype (validate/initcheck_cublas_probe.py).
  step initcheck-layer 90 env MOESIM_REQUIRE_GPU=1 "$sanitizer" --tool initcheck --print-limit 8 \
    --show-backtrace no --error-exitcode 99 "$tests" "--gtest_filter=LayerGpu.SharedExperts*"
  # One process per case, so that each case's ERROR SUMMARY is its own.
  local c
  for c in $(python3 validate/initcheck_cublas_probe.py list); do
    step "initcheck-cublas-$c" 40 "$sanitizer" --tool initcheck --print-limit 2 --show-backtrace no \
      --error-exitcode 99 python3 validate/initcheck_cublas_probe.py "$c"
  done
}

# moesim-run is what links cuBLAS and NCCL (moesim hands `run` and `calibrate` to it).
step env 30 bash -c "nvidia-smi; nvidia-smi -L; ldd $moesim $dist/bin/moesim-run $tests | grep -E 'not found|cublas|nccl'"
for p in "${phases[@]}"; do "phase_$p"; done
exit 0 # every step's exit code is in summary.txt
