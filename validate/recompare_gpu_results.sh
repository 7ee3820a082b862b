#!/usr/bin/env bash
# Measured GPU runs against today's simulator. A gpu_session.sh call commits what it measured
# (run-NAME.json) and the commands that simulated it (summary.txt: sim-NAME with the datasheet
# node, simcal-NAME with the calibration); this re-runs those simulations with the given moesim
# and compares them with the measurement, one Markdown row per configuration: measured step,
# simulated step and error (datasheet, calibrated), mean |error| of the stages' busy time and
# median |error| of the task durations (datasheet / calibrated). A model change is then judged
# against the measurements without a GPU (docs/validation.md, "Measured on a GPU"). A call kept
# as its archive (gpu-results.tar.gz beside summary.txt, no loose run-*.json) is read from it.
#
#   bash validate/recompare_gpu_results.sh validate/results/h200-2026-11-26/call3 build/sim/cli/moesim
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 RESULTS_DIR MOESIM" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
dir=${1%/} moesim=$2
[ -f "$dir/summary.txt" ] || { echo "$0: $dir has no summary.txt (a gpu_session.sh call's results)" >&2; exit 2; }
[ -x "$moesim" ] || { echo "$0: $moesim is not an executable moesim" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/moesim-recompare.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# src: where the measured reports (run-NAME.json) and a session-written model file lie.
src=$dir
if ! compgen -G "$dir/run-*.json" >/dev/null && [ -f "$dir/gpu-results.tar.gz" ]; then
  mkdir "$tmp/archive"
  tar -xzf "$dir/gpu-results.tar.gz" -C "$tmp/archive" --wildcards 'gpu-results/run-*.json' 'gpu-results/*.yaml' ||
    { echo "$0: $dir/gpu-results.tar.gz could not be read" >&2; exit 2; }
  src=$tmp/archive/gpu-results
fi

# simulate KIND NAME: re-runs the summary's KIND-NAME command into $tmp; prints "step% stage% task%".
simulate() {
  local line cmd
  line=$(grep -E "^$1-$2 " "$dir/summary.txt") || return 1
  cmd=$(sed -E 's/^[^ ]+ +exit +[0-9]+ +[0-9]+ s  //' <<<"$line")
  cmd=${cmd//--model RESULTS\//--model $src/}
  cmd=${cmd//RESULTS\//$tmp/}
  cmd=${cmd/#dist\/bin\/moesim/$moesim}
  # shellcheck disable=SC2086 # the command as the summary recorded it: words without quotes
  $cmd >/dev/null 2>"$tmp/err" || { echo "$0: $1-$2 failed: $(cat "$tmp/err")" >&2; return 1; }
  "$moesim" compare "$src/run-$2.json" "$tmp/$1-$2.json" >"$tmp/cmp"
  awk '/^step time/ {step = $NF} /^stages: mean/ {stage = $7; task = $NF; sub(/;/, "", stage)}
       END {print step, stage, task}' "$tmp/cmp"
}

echo "| config | measured | simulated, datasheet | simulated, calibrated | stage | task |"
echo "|---|---|---|---|---|---|"
for run in "$src"/run-*.json; do
  name=$(basename "$run" .json)
  name=${name#run-}
  grep -qE "^sim-$name " "$dir/summary.txt" || continue
  read -r step stage task < <(simulate sim "$name")
  measured=$(awk '/^step time/ {print $(NF-2); exit}' "$tmp/cmp")
  predicted=$(awk '/^step time/ {print $(NF-1); exit}' "$tmp/cmp")
  cal="-" cal_stage="-" cal_task="-"
  if grep -qE "^simcal-$name " "$dir/summary.txt"; then
    read -r cal_step cal_stage cal_task < <(simulate simcal "$name")
    cal="$(awk '/^step time/ {printf "%.0f", $(NF-1); exit}' "$tmp/cmp") ($cal_step)"
  fi
  printf '| %s | %.0f | %.0f (%s) | %s | %s / %s | %s / %s |\n' "$name" "$measured" "$predicted" "$step" "$cal" \
    "$stage" "$cal_stage" "$task" "$cal_task"
done
