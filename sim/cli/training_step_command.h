// `moesim simulate --global-batch N ...`: the whole training step of a whole-network model
// (sim/step), with the layout flags of issue 23 item 8. The flags of the MoE-layer simulation that
// do not apply to it (--tokens, --strategy, ...) are refused with it, and its own flags without
// --global-batch; --chunks, shared by both, pipelines the step's MoE layers (StepSpec::moe_chunks).
#pragma once

#include <string>

#include "sim/cli/simulate_command.h"

namespace moesim::cli {

struct TrainingStepArgs {
  bool selected = false;  // --global-batch was given
  long long global_batch = 0;
  long long micro_batch = 1;
  long long seq = 0;
  int pp = 1;
  int vpp = 1;
  int cp = 1;
  int etp = 0;  // --etp; 0: --tp
  std::string schedule;  // "" = 1f1b, or interleaved with --vpp > 1
  std::string part_layers;  // --part-layers "4,8,8,..."
  std::string recompute = "none";
  std::string recompute_modules;  // --recompute-modules: "" = core_attn (with --recompute selective)
  bool sequence_parallel = false;
  std::string precision = "bf16";
  std::string fp8_recipe;  // empty: current scaling
  std::string attention = "flash";
  bool no_overlap_grad_reduce = false;
  bool overlap_moe_ep_comm = false;
  double host_launch_us = -1;  // --host-launch-us; negative: not given (the host is not modelled)
  std::string dispatcher = "alltoall";  // --dispatcher
};

// The flags only the whole step reads (TrainingStepArgs), and those only the MoE-layer
// simulation reads: each list is refused in the other mode.
const std::vector<std::string>& training_step_only_flags();
const std::vector<std::string>& layer_only_flags();

int run_training_step(StepArgs& args, const TrainingStepArgs& step, const SimulateOutputs& outputs,
                      const std::string& version);

}  // namespace moesim::cli
