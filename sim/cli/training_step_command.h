// `moesim simulate --global-batch N ...`: the whole training step of a whole-network model
// (sim/step), with the layout flags of issue 23 item 8. The flags of the MoE-layer simulation that
// do not apply to it (--tokens, --strategy, ...) are refused with it, and its own flags without
// --global-batch; --chunks, shared by both, pipelines the step's MoE layers (StepSpec::moe_chunks).
#pragma once

#include <string>

#include "sim/cli/simulate_command.h"

namespace moesim::cli {

struct TrainingStepArgs {
  StepOptionFlags options;  // the whole step's own options (sim/spec/step_options.h)
};

// The flags only the whole step reads (every step option's, and --html), and those only the
// MoE-layer simulation reads: each list is refused in the other mode.
const std::vector<std::string>& training_step_only_flags();
const std::vector<std::string>& layer_only_flags();

int run_training_step(StepArgs& args, const TrainingStepArgs& step, const SimulateOutputs& outputs,
                      const std::string& version);

}  // namespace moesim::cli
