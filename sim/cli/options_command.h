// `moesim options [--markdown]`: the run options of the MoE-layer simulation (sim/spec/run_options.h),
// one per line with its run-file key, flag, type, default, values and rule; --markdown prints the
// table of docs/config-reference.md's run-file section, which a test holds equal to it.
#pragma once

#include <iosfwd>

namespace moesim::cli {

struct OptionsArgs {
  bool markdown = false;
};

int run_options_command(const OptionsArgs& args, std::ostream& out);

}  // namespace moesim::cli
