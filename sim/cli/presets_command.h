// `moesim presets [models|gpus|nodes|clusters]`: the bundled presets, one line each (name, size,
// source), every kind when none is named. The names are what --model and --hardware accept.
#pragma once

#include <iosfwd>
#include <string>

namespace moesim::cli {

struct PresetsArgs {
  std::string kind;  // empty: every kind
};

int run_presets(const PresetsArgs& args, std::ostream& out);

}  // namespace moesim::cli
