// The DeepSpeed-TED flags `moesim simulate`, `graph export`, `plan` and `sweep` share (--no-dtd,
// --grad-sync, --zero, --checkpoint; --tp is one degree for the first three and a list for sweep),
// and their checks, so that every command refuses the same bad values with the same words. They
// are registered in main.cc (the one translation unit that includes CLI11).
#pragma once

#include <string>

#include "sim/spec/types.h"

namespace moesim::cli {

struct LayoutFlags {
  bool no_dtd = false;     // --no-dtd: no duplicate token dropping with tp > 1
  bool grad_sync = false;  // --grad-sync: simulate the data-parallel gradient all-reduces
  int zero_stage = 0;      // --zero
  bool zero_given = false; // --zero was on the command line (a sweep file's zero_stage stays otherwise)
  std::string checkpoint = "none";  // --checkpoint none|full|cac
  bool checkpoint_given = false;    // on the command line (a sweep file's checkpoint stays otherwise)
};

// --checkpoint's value; InputError naming the valid ones.
ActivationCheckpointing parse_checkpoint_flag(const std::string& value);

// Throws InputError unless every --tp degree is at least 1 (max_tp: the largest, min_tp: the
// smallest), --zero is 0 or 1, and --no-dtd (no_dtd_given: on the command line) comes with a degree
// above 1, where duplicate token dropping exists.
void check_layout_flags(int min_tp, int max_tp, bool no_dtd_given, int zero_stage);

}  // namespace moesim::cli
