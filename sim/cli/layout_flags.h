// The DeepSpeed-TED rule the run options' table cannot state alone (sim/spec/run_options.h): --no-dtd
// needs a tensor-parallel degree above 1, checked the same way by `moesim simulate`, `graph export`,
// `plan` and `sweep`.
#pragma once

namespace moesim::cli {

// Throws InputError when --no-dtd was given (no_dtd_given) and no tensor-parallel degree (max_tp:
// the largest) is above 1, where duplicate token dropping exists.
void check_no_dtd_flag(bool no_dtd_given, int max_tp);

}  // namespace moesim::cli
