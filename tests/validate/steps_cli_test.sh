#!/bin/bash
# `moesim validate steps` on the tiny made-up datasets of tests/validate/steps/ (the committed
# ones take minutes: their 530B and 1T rows are not run here): every row is listed, simulated or
# with its reason, one CSV row per row, the goal verdicts agree with the errors, progress goes to
# stderr, --only picks rows, and bad data is named by file and line (exit 2).
#   usage: steps_cli_test.sh SOURCE_DIR MOESIM SCRATCH
set -u
src=$1 moesim=$2 scratch=$3
data=$src/tests/validate/steps
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$moesim" validate steps --data "$data" --csv "$scratch/rows.csv" > "$scratch/out" 2> "$scratch/err" ||
  fail "exit $? ($(cat "$scratch/err"))"
grep -q '^== tiny-steps: made-up step times of a tiny GPT' "$scratch/out" || fail "no table for tiny-steps"
grep -q "^   not simulated: the source states too little" "$scratch/out" || fail "no reason for tiny-listed"
# Every CSV row of both datasets, in the table and in --csv, none dropped.
for line in 2 3 4 5 6 7; do
  grep -qE "^ +$line (TINY|TINY-DP|OTHER) " "$scratch/out" || fail "tiny-steps line $line not listed"
  grep -q "^tiny-steps,$line," "$scratch/rows.csv" || fail "tiny-steps line $line not in --csv"
done
grep -qE '^ +2 1B .* 400\.5  not simulated: steps.yaml: not_simulated; no micro-batch size stated; no recomputation stated' \
  "$scratch/out" || fail "tiny-listed's row: $(grep ' 1B ' "$scratch/out")"
[ "$(($(wc -l < "$scratch/rows.csv") - 1))" -eq 7 ] || fail "$(wc -l < "$scratch/rows.csv") lines in --csv, expected 8"
grep -q "not simulated: no iteration_time_s stated" "$scratch/out" || fail "the row without a time"
grep -q "not simulated: no preset for model 'OTHER' in steps.yaml" "$scratch/out" || fail "the row without a preset"
grep -q "not simulated: the simulator refuses it: --tp 8 does not divide the 4 attention heads" "$scratch/out" ||
  fail "the refused layout"
# The verdict agrees with the errors of the CSV: every compared row within 10%, or not.
within=$(awk -F, '$1 == "tiny-steps" && $18 != "" { n++; if ($18 <= 0.10 && $18 >= -0.10) w++ } END { print w + 0 "/" n }' "$scratch/rows.csv")
verdict=met; [ "${within%/*}" = "${within#*/}" ] || verdict="NOT met"
grep -q "^   goal: every row within 10%: $verdict: ${within%/*} of ${within#*/} rows within, worst .* (3 not compared)$" \
  "$scratch/out" || fail "row goal ($within within): $(grep 'goal: every row' "$scratch/out")"
grep -qE '^   goal: speed-up within 3 points: (met|NOT met): [01] of 1 pairs within, worst [-+][0-9.]+ points$' "$scratch/out" ||
  fail "speed-up goal: $(grep 'speed-up within' "$scratch/out")"
grep -q '^   tiny-listed                  no goal stated (report only): 0 of 1 rows compared$' "$scratch/out" ||
  fail "summary of tiny-listed"
[ "$(grep -c '^validate steps: \[[1-7]/7\] ' "$scratch/err")" -eq 7 ] || fail "progress: $(cat "$scratch/err")"

# --only: one row, the other dataset left out.
"$moesim" validate steps --data "$data" --only tiny-steps:3 > "$scratch/one" 2> "$scratch/one.err" || fail "--only: exit $?"
grep -q '^validate steps: \[1/1\] tiny-steps:3 TINY, 8 GPUs: simulated' "$scratch/one.err" || fail "--only: $(cat "$scratch/one.err")"
grep -q '^== tiny-listed' "$scratch/one" && fail "--only tiny-steps:3 printed tiny-listed"

# Bad input: exit 2 and an error naming the file and line (or the flag), before any simulation.
expect_error() {  # expect_error PATTERN ARGS...
  local pattern=$1; shift
  "$moesim" validate steps "$@" > /dev/null 2> "$scratch/bad.err"
  local code=$?
  [ "$code" -eq 2 ] || fail "$*: exit $code, expected 2"
  grep -q "$pattern" "$scratch/bad.err" || fail "$*: $(cat "$scratch/bad.err")"
  grep -q '^validate steps: ' "$scratch/bad.err" && fail "$*: simulated before refusing"
  return 0
}
cp -r "$data" "$scratch/bad"
sed -i '3s/,0.008,/,0.0x8,/' "$scratch/bad/tiny-steps/steps.csv"
expect_error "^error: $scratch/bad/tiny-steps/steps.csv:3:1: iteration_time_s '0.0x8' is not a number" --data "$scratch/bad"
cp "$data/tiny-steps/steps.csv" "$scratch/bad/tiny-steps/steps.csv"
sed -i '3s/^TINY,4,256,8,2,2,2,8,/TINY,4,256,8,2,2,2,/' "$scratch/bad/tiny-steps/steps.csv"
expect_error "^error: $scratch/bad/tiny-steps/steps.csv:3:1: 17 cells; the header has 18" --data "$scratch/bad"
cp "$data/tiny-steps/steps.csv" "$scratch/bad/tiny-steps/steps.csv"
sed -i 's/^attention: unfused/attention: fused/' "$scratch/bad/tiny-steps/steps.yaml"
expect_error "^error: $scratch/bad/tiny-steps/steps.yaml:10:.*attention" --data "$scratch/bad"
expect_error "^error: --only: no dataset 'nope'; datasets: tiny-listed, tiny-steps" --data "$data" --only nope
expect_error "^error: --data $scratch/none: no such folder" --data "$scratch/none"
echo "ok"
