#!/usr/bin/env bash
# includes_follow_links.sh on a made-up tree (bad_tree/): it must name every include that breaks
# the tree's link table, and only those, and exit 1.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(bash "$here/includes_follow_links.sh" "$here/bad_tree" 2>&1)
rc=$?
echo "$out"
fail() { echo "FAILED: $*"; exit 1; }
[ $rc -eq 1 ] || fail "exit code $rc, expected 1"
expect() { grep -qF -- "$1" <<<"$out" || fail "missing: $1"; }
expect "sim/graph/task.h:3: includes sim/engine/engine.h, but moesim_graph does not link the library of sim/engine"
expect "sim/engine/nested/deep.cc:2: includes ../engine.h by a relative path"
expect "runtime/exec/measure.cc:2: includes sim/engine/engine.h, but moesim_runtime_host does not link the library of sim/engine"
[ "$(grep -c '' <<<"$out")" -eq 3 ] || fail "expected exactly 3 findings (validate may include the runtime and the engine; the engine, nested or not, the graph)"
echo "PASSED"
