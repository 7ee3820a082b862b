// CLI11 validators of moesim's numbers, shared by the translation units that register options
// (main.cc, runtime_options.cc): every numeric option is read strictly through them.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "sim/cli/number_flags.h"

namespace moesim::cli {

// Numbers are read strictly (sim/cli/number_flags.h). A transform rather than a check: CLI11 then
// converts the plain decimal text checked here, never "010" as octal.
inline CLI::Validator whole(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator([min, max](std::string& text) { return integer_rule(text, min, max); },
                        integer_range(min, max));
}

inline CLI::Validator real(double min, double max, bool min_exclusive = false) {
  return CLI::Validator(
      [min, max, min_exclusive](std::string& text) { return number_rule(text, min, max, min_exclusive); },
      number_range(min, max, min_exclusive));
}

}  // namespace moesim::cli
