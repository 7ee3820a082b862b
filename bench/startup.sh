#!/usr/bin/env bash
# Start-up cost of the `moesim` program as a user meets it: the wall-clock time and peak resident
# memory of whole runs, `moesim --help` and a 64-rank single-layer `moesim simulate` (the issue's
# targets: under 15 ms and 30 MB each). A process's start (dynamic loading, static constructors)
# is invisible to the Google Benchmark programs of this folder, which run inside one process.
#
#   bench/startup.sh [MOESIM] [RUNS]     MOESIM: default build/sim/cli/moesim; RUNS: default 21
#
# Wall time is taken around a plain run (bash's EPOCHREALTIME, microseconds: /usr/bin/time's
# %e has only 10 ms steps), with the CPU time (user + system) the run's process took (bash's
# `times`, milliseconds): on a machine that other jobs share, the wall time grows with their load
# while the CPU time stays what an idle machine's wall time would be. Peak RSS is /usr/bin/time's
# %M of separate runs. Each figure is the median of RUNS runs, after one untimed run that warms the
# page cache.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
moesim=${1:-$here/build/sim/cli/moesim}
runs=${2:-21}
if [[ ! -x $moesim ]]; then
  echo "error: $moesim is not an executable (build it, or name it: bench/startup.sh PATH/moesim)" >&2
  exit 2
fi
if [[ ! $runs =~ ^[1-9][0-9]*$ ]]; then
  echo "error: RUNS must be a positive integer (got '$runs')" >&2
  exit 2
fi
if [[ ! -x /usr/bin/time ]]; then
  echo "error: /usr/bin/time (GNU time) is needed for the peak RSS" >&2
  exit 2
fi

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Sets cpu to the CPU seconds (user + system) of this shell's finished children so far, from
# `times`, which must run in this shell (a command substitution would count its own children).
cpu_file=$(mktemp)
trap 'rm -f "$cpu_file"' EXIT
children_cpu() {
  times >"$cpu_file"
  cpu=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; ++i) { split($i, p, "m"); t += p[1] * 60 + p[2] } print t }' \
        "$cpu_file")
}

# Prints the medians of the wall time, the CPU time and the peak RSS of the command in "$@".
measure() {
  "$@" >/dev/null 2>&1 || { echo "error: '$*' failed" >&2; exit 2; }
  local walls=() cpus=() rss=() i start end cpu cpu0 cpu1
  for ((i = 0; i < runs; ++i)); do
    children_cpu
    cpu0=$cpu
    start=$EPOCHREALTIME
    "$@" >/dev/null 2>&1
    end=$EPOCHREALTIME
    children_cpu
    cpu1=$cpu
    walls+=("$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", (e - s) * 1000 }')")
    cpus+=("$(awk -v s="$cpu0" -v e="$cpu1" 'BEGIN { printf "%.0f", (e - s) * 1000 }')")
    rss+=("$(/usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1)")
  done
  local wall_ms cpu_ms rss_kb
  wall_ms=$(printf '%s\n' "${walls[@]}" | median)
  cpu_ms=$(printf '%s\n' "${cpus[@]}" | median)
  rss_kb=$(printf '%s\n' "${rss[@]}" | median)
  awk -v w="$wall_ms" -v c="$cpu_ms" -v r="$rss_kb" 'BEGIN { printf "%8.1f ms %6d ms %8.1f MB\n", w, c, r / 1024 }'
}

cd "$here"
echo "# $moesim, median of $runs runs: wall time, CPU time, peak RSS"
printf '%-44s %s\n' "moesim --help" "$(measure "$moesim" --help)"
printf '%-44s %s\n' "moesim simulate (64 GPUs, one MoE layer)" \
  "$(measure "$moesim" simulate --model models/moe-gpt-s-64e.yaml \
       --hardware hardware/clusters/dgx-a100-2node.yaml --tokens 4096 --gpus 64)"
