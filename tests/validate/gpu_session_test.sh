#!/usr/bin/env bash
# validate/gpu_session.sh on a machine without a GPU, before a GPU session depends on it:
# every `moesim simulate` it issues (datasheet and calibrated) must be accepted, `moesim run`
# must fail with the no-GPU / no-CUDA message (exit 2) and the script must go on, a spent budget
# must skip steps and still pack the results, and bad arguments must be refused with exit 2.
#
#   gpu_session_test.sh SOURCE_DIR MOESIM_BINARY WORK_DIR
set -uo pipefail
src=$1 moesim=$2 work=$3
rm -rf "$work"
mkdir -p "$work/dist/bin"
ln -s "$moesim" "$work/dist/bin/moesim"
# As installed: moesim-run beside moesim (the script's env step lists its libraries).
ln -s "$(dirname "$moesim")/moesim-run" "$work/dist/bin/moesim-run"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# A calibration of the H100 preset the script simulates (any plausible values).
cat >"$work/h100-cal.yaml" <<'EOF'
schema_version: 1
kind: calibration
name: test
gpu: H100-SXM5-80GB
device: test
kernel_launch_overhead: 4 us
gemm:
  tf32:
    m: [64, 4096]
    n: [512, 2048]
    k: [512, 2048]
    time_us: [[10, 30], [30, 100], [90, 330], [330, 1300]]
EOF

session() { # OUT-DIR ARGS...: runs the script, prints its exit code
  local out=$1
  shift
  (cd "$src" && OUT="$out" MOESIM_DIST="$work/dist" bash validate/gpu_session.sh "$@" >"$out.log" 2>&1)
  echo $?
}

# 1. The measure phase with a calibration: every simulation runs, every run says why it cannot.
out=$work/measure
mkdir -p "$out"
rc=$(MOESIM_CALIBRATION="$work/h100-cal.yaml" session "$out" run measure holdout)
[ "$rc" = 0 ] || fail "run measure holdout exited $rc: $(cat "$out.log")"
summary=$out/summary.txt
[ -s "$summary" ] || fail "no summary.txt"
[ -s "$out/gpu-results.tar.gz" ] || fail "no gpu-results.tar.gz"
sims=$(grep -cE '^sim(cal)?-' "$summary")
[ "$sims" = 50 ] || fail "expected 50 simulate steps (18 + 7 holdout configurations, datasheet and calibrated), got $sims"
bad=$(grep -E '^sim(cal)?-' "$summary" | grep -v 'exit   0')
[ -z "$bad" ] || fail "simulate steps failed: $bad"
runs=$(grep -cE '^run-.*exit   2 ' "$summary")
[ "$runs" = 25 ] || fail "expected 25 moesim run steps with exit 2 (no GPU), got $runs: $(grep '^run-' "$summary")"
mkdir -p "$out/unpacked"
tar -xzf "$out/gpu-results.tar.gz" -C "$out/unpacked" || fail "the archive does not unpack"
[ -s "$out/unpacked/gpu-results/simcal-loopback8-s1-n4.json" ] || fail "the archive lacks the calibrated loopback simulation"
# Exit 2 is also what a misspelt flag gives: each run must have got as far as the GPU.
for f in "$out"/unpacked/gpu-results/run-*.txt; do
  grep -qE 'needs a GPU, and none is usable|has no GPU runtime' "$f" || fail "$(basename "$f"): $(cat "$f")"
done
left=$(cd "$out" && ls -A | grep -v '^unpacked$' | tr '\n' ' ')
[ "$left" = "gpu-results.tar.gz summary.txt " ] || fail "OUT must hold only the summary and the archive, holds: $left"

# 2. The script's own exit code is 0 whatever its steps gave (they are in the summary), also when
# a calibration that failed is the last step; a zero-padded budget is decimal.
out=$work/calibrate
mkdir -p "$out"
rc=$(MOESIM_BUDGET_S=0560 session "$out" run calibrate)
[ "$rc" = 0 ] || fail "run calibrate without a GPU exited $rc: $(cat "$out.log")"
grep -qE '^calibrate +exit +2 ' "$out/summary.txt" || fail "calibrate's exit code is not in the summary: $(cat "$out/summary.txt")"

# 3. A spent budget: every step skipped, the summary and the archive still written.
out=$work/budget
mkdir -p "$out"
rc=$(MOESIM_BUDGET_S=16 session "$out" run tests measure)
[ "$rc" = 0 ] || fail "a spent budget exited $rc: $(cat "$out.log")"
ran=$(grep -vc 'skipped (budget spent)' "$out/summary.txt")
[ "$ran" = 0 ] || fail "steps ran without budget: $(cat "$out/summary.txt")"
[ -s "$out/gpu-results.tar.gz" ] || fail "no archive when the budget is spent"

# 4. Bad arguments.
for args in "run benchmark" "walk"; do
  out=$work/bad
  mkdir -p "$out"
  rc=$(session "$out" $args)
  [ "$rc" = 2 ] || fail "'$args' exited $rc, expected 2"
done
rc=$(MOESIM_BUDGET_S=ten session "$work/bad" run measure)
[ "$rc" = 2 ] || fail "MOESIM_BUDGET_S=ten exited $rc, expected 2"
rc=$(MOESIM_CALIBRATION="$work/missing.yaml" session "$work/bad" run measure)
[ "$rc" = 2 ] || fail "a missing MOESIM_CALIBRATION exited $rc, expected 2"
grep -q "missing.yaml, which does not exist" "$work/bad.log" || fail "no message for the missing calibration: $(cat "$work/bad.log")"

[ "$failures" = 0 ] && echo "gpu_session.sh: all checks passed"
exit $((failures > 0))
