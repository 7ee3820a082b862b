#!/usr/bin/env bash
# validate/recompare_gpu_results.sh over every committed GPU result with a summary (loose files or
# the call's archive): each measured
# configuration gets a row with numbers in every column (the simulations its session ran are still
# accepted by today's moesim), and a folder without results is refused with exit 2.
#   recompare_gpu_results_test.sh SOURCE_DIR MOESIM
set -uo pipefail
src=$1 moesim=$2
fail() {
  echo "FAIL: $*"
  exit 1
}
found=0
for summary in "$src"/validate/results/*/*/summary.txt; do
  dir=$(dirname "$summary")
  if ls "$dir"/run-*.json >/dev/null 2>&1; then
    runs=$(ls "$dir"/run-*.json | grep -vc -- "-trace.json$")
  elif [ -f "$dir/gpu-results.tar.gz" ]; then # a call kept as its archive
    runs=$(tar -tzf "$dir/gpu-results.tar.gz" | grep -E '/run-[^/]*\.json$' | grep -vc -- "-trace.json$")
    [ "$runs" -gt 0 ] || continue
  else
    continue
  fi
  found=1
  out=$(bash "$src/validate/recompare_gpu_results.sh" "$dir" "$moesim") || fail "$dir: exit $?"
  rows=$(grep -cE '^\| [a-z0-9-]+ \| [0-9]+ \| [0-9]+ \([+-][0-9.]+%\) \| ' <<<"$out")
  [ "$rows" = "$runs" ] || fail "$dir: $rows complete rows for $runs measured runs: $out"
done
[ "$found" = 1 ] || fail "no committed GPU results with measured runs under $src/validate/results"
bash "$src/validate/recompare_gpu_results.sh" "$src/validate" "$moesim" >/dev/null 2>&1
[ $? = 2 ] || fail "a folder without summary.txt must exit 2"
echo "ok"
