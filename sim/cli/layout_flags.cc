#include "sim/cli/layout_flags.h"

#include <string>

#include "sim/core/error.h"

namespace moesim::cli {

ActivationCheckpointing parse_checkpoint_flag(const std::string& value) {
  const auto c = parse_activation_checkpointing(value);
  if (!c) {
    std::string names;
    for (const std::string& n : activation_checkpointing_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError("--checkpoint '" + value + "' is not an activation checkpointing mode; valid: " + names);
  }
  return *c;
}

void check_layout_flags(int min_tp, int max_tp, bool no_dtd_given, int zero_stage) {
  if (min_tp < 1) throw InputError("--tp must be at least 1, got " + std::to_string(min_tp));
  if (zero_stage != 0 && zero_stage != 1)
    throw InputError("--zero must be 0 or 1 (ZeRO stage of the optimizer states), got " + std::to_string(zero_stage));
  if (no_dtd_given && max_tp == 1)
    throw InputError("--no-dtd turns off duplicate token dropping, which only exists with --tp > 1");
}

}  // namespace moesim::cli
