// `moesim run`: measure one training step of the MoE layer on GPUs with the runtime
// (runtime/exec/measure.h), next to the simulator's prediction for the same graph. The options
// are registered in main.cc (CLI11 stays out of this header). On a build without
// the GPU runtime the command exists and exits 2 saying so.
#pragma once

#include "sim/cli/run_option_flags.h"

#include <string>

namespace moesim::cli {

struct RunArgs {
  std::string model_path;
  std::string hardware_path;
  std::string calibration_path;  // empty: none
  // --tokens, --chunks, --layers, --strategy, --order, --slots, --seed: the run options
  // (sim/spec/run_options.h) of the measured step and of its prediction; the seed also seeds the
  // inputs and parameters.
  RunOptionFlags options;
  std::string dtype;  // "" = the model's; fp32 | tf32 | bf16 | fp16
  int iters = 20;
  int warmup = 5;
  std::string json_path;
  std::string trace_path;
  bool check = false;
  int ranks = 1;
  bool loopback = false;
};

// The run options `moesim run` takes as flags.
const std::vector<std::string>& run_command_option_keys();

// Exit code: 0, or 3 when --check found a mismatch. Throws InputError (exit 2) for bad input, no
// GPU, or a build without the GPU runtime.
int run_measure(const RunArgs& args, const std::string& version);

}  // namespace moesim::cli
