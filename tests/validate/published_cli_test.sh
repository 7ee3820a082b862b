#!/bin/bash
# `moesim validate published` over the committed datasets: it reads every file, prints a table per
# dataset and the summary, writes one CSV row per point, and names file, line and rule for bad data
# (exit 2). Whether the goals are met is what it reports, not what this test checks.
#   usage: published_cli_test.sh SOURCE_DIR MOESIM SCRATCH
set -u
src=$1 moesim=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$moesim" validate published --data "$src/validate/data" --csv "$scratch/points.csv" > "$scratch/out" 2> "$scratch/err" ||
  fail "exit $? ($(cat "$scratch/err"))"
# The datasets are the folders with a source.yaml; the whole-step tables (issue 23) have a
# steps.yaml instead, for `moesim validate steps` (steps_cli_test.sh).
datasets=$(for f in "$src"/validate/data/*/source.yaml; do dirname "$f"; done)
for dir in $datasets; do
  name=$(basename "$dir")
  grep -q "^== $name: " "$scratch/out" || fail "no table for $name"
  grep -q "^   $name " "$scratch/out" || fail "no summary line for $name"
done
grep -q '^== summary' "$scratch/out" || fail "no summary"
# One CSV row per measured point: the nccl-tests rows, and the XLA tables' data lines.
expected=0
for dir in $datasets; do
  for log in "$dir"/*.log; do
    [ -e "$log" ] && expected=$((expected + $(grep -cE '^ *[0-9]+ +[0-9]+ ' "$log")))
  done
  for csv in "$dir"/*.csv; do
    [ -e "$csv" ] && expected=$((expected + $(grep -v '^#' "$csv" | tail -n +2 | grep -c .)))
  done
done
rows=$(($(wc -l < "$scratch/points.csv") - 1))
[ "$rows" -eq "$expected" ] || fail "$rows CSV rows, $expected measured points"

# A broken row: exit 2 and an error naming the file and line.
cp -r "$src/validate/data" "$scratch/bad"
csv=$(ls "$scratch"/bad/*/sm_90.csv | head -1)
sed -i '3s/,[0-9]*$/,-5/' "$csv"
"$moesim" validate published --data "$scratch/bad" > /dev/null 2> "$scratch/bad.err"
code=$?
[ "$code" -eq 2 ] || fail "broken data: exit $code, expected 2"
grep -q "^error: $csv:3:.* must be positive" "$scratch/bad.err" || fail "broken data: $(cat "$scratch/bad.err")"
echo "ok: $rows points"
