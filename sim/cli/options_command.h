// `moesim options [run|step] [--markdown]`: the run options of the MoE-layer simulation
// (sim/spec/run_options.h), one per line with its run-file key, flag, type, default, values and
// rule, and the whole step's own options (sim/spec/step_options.h); --markdown prints the tables
// of docs/config-reference.md's run-file section and of docs/training-step.md's flags, which tests
// hold equal to them.
#pragma once

#include <iosfwd>
#include <string>

namespace moesim::cli {

struct OptionsArgs {
  std::string kind;  // "run", "step", or empty: both
  bool markdown = false;
};

int run_options_command(const OptionsArgs& args, std::ostream& out);

}  // namespace moesim::cli
