#!/usr/bin/env bash
# Every check of the GPU runtime that needs a GPU, in one go, for a session that is lent a GPU
# machine for a short time (docs/runtime.md, "On a GPU machine"). Two halves:
#
#   bash validate/gpu_session.sh build        # here (needs the build dependencies): dist/ to carry
#   bash validate/gpu_session.sh run [OUT]    # on the GPU machine, from the repository root
#
# `run` executes each step with its own time limit, keeps going after a failure, and writes
# OUT/summary.txt (one line per step: exit code, seconds, what it was) and OUT/gpu-results.tar.gz
# (every step's output and JSON), so that everything comes back as two files. OUT defaults to
# $OUT (the device tool's folder) or ./out. Results worth keeping are committed under
# validate/results/ with this script's name as the command that made them.
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
    cmake --install build-gpu --prefix dist
    du -sh dist
    exit 0
    ;;
  run) ;;
  *)
    echo "usage: $0 build | run [OUT]" >&2
    exit 2
    ;;
esac

out=${2:-${OUT:-out}}
work="$out/gpu-results"
mkdir -p "$work"
summary="$out/summary.txt"
: >"$summary"
export MOESIM_SOURCE_DIR=$PWD
# cuBLAS and NCCL come from the machine: the CUDA toolkit, or a PyTorch install's wheels.
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null); do
  [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH

# step NAME SECONDS COMMAND...: output to $work/NAME.txt, one summary line.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$work/$name.txt" 2>&1
  local rc=$?
  printf '%-28s exit %3d  %4d s  %s\n' "$name" "$rc" "$((SECONDS - start))" "$*" | tee -a "$summary"
}

moesim=dist/bin/moesim
model=models/moe-gpt-s-64e.yaml
# The node preset of the GPU the machine has (an H200 is not an H100 with more memory: HBM differs).
case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
  "NVIDIA H200"*) node=hardware/nodes/hgx-h200.yaml ;;
  *) node=hardware/nodes/hgx-h100.yaml ;;
esac
cal="$work/calibration.yaml"

step env 60 bash -c "nvidia-smi; nvidia-smi -L; ldd $moesim dist/bin/moesim_runtime_tests | grep -E 'not found|cublas|nccl'"
# Correctness: every dtype x n in {1,2,4,8} x strategy against the CPU reference, bitwise equality
# across strategies, 64 experts over 8 loopback ranks, memory next to the prediction.
step runtime-tests 420 env MOESIM_REQUIRE_GPU=1 dist/bin/moesim_runtime_tests
# Calibration of this GPU (launch gap, HBM, PCIe, GEMM tables in the model's tf32, bf16 and fp32),
# so that each run below is compared with the datasheet prediction and with the calibrated one.
step calibrate 240 $moesim calibrate --hardware $node --out "$cal" --dtypes tf32,bf16,fp32
# Measured against simulated, one rank: every strategy at n = 4, then n = 1, 2, 8 without reuse,
# in the model's own dtypes (fp32 storage, TF32 GEMMs) so that `moesim simulate` describes the same
# layer; each measured report is compared with the simulation of every rank (`moesim compare`).
measure() {  # NAME RANKS ARGS...: moesim run, moesim simulate of the same layer, moesim compare
  local name=$1 ranks=$2
  shift 2
  step "run-$name" 240 $moesim run --model $model --hardware $node --tokens 4096 --ranks "$ranks" "$@" \
    --json "$work/run-$name.json" --trace "$work/run-$name-trace.json"
  local sim_args=()
  for a in "$@"; do [ "$a" != --check ] && sim_args+=("$a"); done  # --loopback: simulate the same GPU sharing
  step "sim-$name" 60 $moesim simulate --model $model --hardware $node --tokens 4096 --ep "$ranks" --all-ranks \
    "${sim_args[@]}" --json "$work/sim-$name.json"
  step "compare-$name" 60 $moesim compare "$work/run-$name.json" "$work/sim-$name.json" --csv "$work/compare-$name.csv"
  if [ -s "$cal" ]; then
    step "simcal-$name" 60 $moesim simulate --model $model --hardware $node --calibration "$cal" --tokens 4096 \
      --ep "$ranks" --all-ranks "${sim_args[@]}" --json "$work/simcal-$name.json"
    step "comparecal-$name" 60 $moesim compare "$work/run-$name.json" "$work/simcal-$name.json" \
      --csv "$work/comparecal-$name.csv"
  fi
}
for s in none s1 s2 s3 s4; do measure "$s-n4" 1 --chunks 4 --strategy $s --check; done
for n in 1 2 8; do measure "none-n$n" 1 --chunks $n --strategy none; done
# Two layers back to back, checked layer by layer.
measure layers2-s4-n4 1 --chunks 4 --strategy s4 --layers 2 --check
# Eight virtual ranks on the one GPU (all-to-all as device copies), simulated as a loopback node:
# the ranks share the GPU's compute, PCIe link and memory (docs/concepts.md).
measure loopback8-s1-n4 8 --chunks 4 --strategy s1 --loopback --check
# Speed: the layer against its GEMMs alone (target <= 1.25x), and plain PyTorch on the same GPU.
step bench-layer 300 dist/bin/moesim_moe_layer_gpu
step bench-torch 300 python3 bench/moe_layer_torch.py

tar -czf "$out/gpu-results.tar.gz" -C "$out" gpu-results
rm -rf "$work"
echo "wrote $summary and $out/gpu-results.tar.gz"
