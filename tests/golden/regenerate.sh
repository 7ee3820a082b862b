#!/usr/bin/env bash
# Regenerates the golden timelines (docs/golden.md) with a built moesim:
#   tests/golden/regenerate.sh BUILD_DIR [CASE ...]
# Every case by default. Review `git diff tests/golden` and commit the change on its own, saying
# why the timelines moved.
set -euo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [CASE ...]" >&2
  exit 2
fi
golden_dir="$(cd "$(dirname "$0")" && pwd)"
if [[ ! -d "$1" ]]; then
  echo "error: $1 is not a build folder; build first (cmake --build BUILD_DIR)" >&2
  exit 2
fi
moesim="$(cd "$1" && pwd)/sim/cli/moesim"
shift
if [[ ! -x "$moesim" ]]; then
  echo "error: $moesim is not an executable; build first (cmake --build BUILD_DIR)" >&2
  exit 2
fi
cases=("$@")
if [[ ${#cases[@]} -eq 0 ]]; then
  for dir in "$golden_dir"/*/; do
    [[ -f "$dir/scenario.yaml" || -f "$dir/step.args" ]] && cases+=("$(basename "$dir")")
  done
fi
for name in "${cases[@]}"; do
  dir="$golden_dir/$name"
  # Written next to the old file and renamed, so a failed run leaves the old timeline in place.
  if [[ -f "$dir/step.args" && -f "$dir/scenario.yaml" ]]; then
    echo "error: $dir has both scenario.yaml and step.args; keep one" >&2
    exit 2
  elif [[ -f "$dir/step.args" ]]; then
    # A whole-step case: one line of flags without quotes, run in its folder (as
    # check_golden.cmake runs them).
    if [[ $(wc -l < "$dir/step.args") -ne 1 ]] || grep -q "[\"']" "$dir/step.args"; then
      echo "error: $dir/step.args must be one line of flags without quotes" >&2
      exit 2
    fi
    read -r -a args < "$dir/step.args"
    (cd "$dir" && "$moesim" simulate "${args[@]}" --timeline "$dir/expected.timeline.new" >/dev/null)
  elif [[ -f "$dir/scenario.yaml" ]]; then
    "$moesim" simulate --run "$dir/scenario.yaml" --timeline "$dir/expected.timeline.new" >/dev/null
  else
    echo "error: $dir has neither scenario.yaml nor step.args (no golden case '$name')" >&2
    exit 2
  fi
  mv "$dir/expected.timeline.new" "$dir/expected.timeline"
  echo "$name: $(grep -c '^task ' "$dir/expected.timeline") task lines, $(sed -n 's/^step_ns //p' "$dir/expected.timeline") ns"
done
