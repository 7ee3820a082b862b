#!/usr/bin/env bash
# Rewrites the generated table of docs/bad-input.md from the answers of a built moesim to the cases
# of tests/docs/bad_inputs/cases.txt:
#   tests/docs/regenerate_bad_input_table.sh BUILD_DIR
# Review `git diff docs/bad-input.md` and commit it with the change that moved an answer.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
tests="$1/tests/docs/moesim_docs_tests"
if [[ ! -x "$tests" ]]; then
  echo "error: $tests is not an executable; build first (cmake --build BUILD_DIR)" >&2
  exit 2
fi
MOESIM_REGENERATE_DOCS=1 "$tests" --gtest_filter='BadInputTable.EveryCase*'
