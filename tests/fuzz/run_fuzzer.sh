#!/usr/bin/env bash
# Runs one fuzz target of a MOESIM_FUZZ=ON build for a while, with one job, and says what it did.
#
#   tests/fuzz/run_fuzzer.sh FUZZ_BUILD_DIR TARGET SECONDS [libFuzzer flags...]
#
# TARGET: yaml_loaders, graph_json or nccl_tests_log. The fuzzer starts from the build's
# seeds/TARGET and the committed tests/fuzz/corpus/TARGET, and writes the inputs it keeps to
# FUZZ_BUILD_DIR/tests/fuzz/work/TARGET (the committed corpus is only read). -rss_limit_mb and
# -timeout make an unbounded allocation or a hang a finding, like a crash, a sanitizer report or
# an exception other than InputError; the input is written to FUZZ_BUILD_DIR/tests/fuzz/findings/.
# Exit status: 0 when nothing was found, 1 with a finding, 2 when the target is not built.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 3 ] || { echo "usage: $0 FUZZ_BUILD_DIR TARGET SECONDS [libFuzzer flags...]" >&2; exit 2; }
build=$1 target=$2 seconds=$3
shift 3
fuzz_dir=$build/tests/fuzz
bin=$fuzz_dir/fuzz_$target
if [ ! -x "$bin" ]; then
  echo "run_fuzzer: $bin is not built (cmake --build $build --target moesim_fuzz)" >&2
  exit 2
fi
work=$fuzz_dir/work/$target
findings=$fuzz_dir/findings
log=$fuzz_dir/$target.log
mkdir -p "$work" "$findings"
flags=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
       -artifact_prefix="$findings/$target-")
[ -f "$here/dict/$target.dict" ] && flags+=(-dict="$here/dict/$target.dict")

status=0
"$bin" "${flags[@]}" "$@" "$work" "$fuzz_dir/seeds/$target" "$here/corpus/$target" >"$log" 2>&1 || status=$?

stat() { grep -o "stat::$1: *[0-9]*" "$log" | grep -o '[0-9]*$' || echo "?"; }
# The corpus in the fuzzer's memory at the end ("corp: files/size" of its last status line), and
# what it wrote to the work folder.
corpus=$( { grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" || true; } | tail -n 1 | cut -d' ' -f2)
kept_files=$(find "$work" -type f | wc -l)
kept_bytes=$(find "$work" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
echo "$target: $(stat number_of_executed_units) executions in ${seconds} s ($(stat average_exec_per_sec)/s);" \
     "corpus ${corpus:-?} (files/bytes); work folder $kept_files files, $kept_bytes bytes; log $log"
if [ "$status" -ne 0 ]; then
  echo "$target: FINDING (libFuzzer exit status $status):"
  grep -E '^(==[0-9]+==ERROR|SUMMARY|.*fuzz property violated|.*runtime error|.*uncaught|.*deadly signal|.*Test unit written|.*out-of-memory|.*Timeout|.*==ERROR)' \
    "$log" | head -n 20 || true
  echo "reproduce: $bin FILE (the file named above); fix, then keep the file in tests/fuzz/corpus/$target/"
  exit 1
fi
