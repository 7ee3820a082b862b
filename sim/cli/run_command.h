// `moesim run`: measure one training step of the MoE layer on GPUs with the runtime
// (runtime/exec/measure.h), next to the simulator's prediction for the same graph. The options
// are registered in main.cc (CLI11 stays out of this header). On a build without
// the GPU runtime the command exists and exits 2 saying so.
#pragma once

#include <string>

namespace moesim::cli {

struct RunArgs {
  std::string model_path;
  std::string hardware_path;
  std::string calibration_path;  // empty: none
  long long tokens = 0;
  int chunks = 1;
  int layers = 1;  // MoE layers back to back
  std::string strategy = "none";
  std::string order = "mpipemoe";
  int slots = 2;
  std::string dtype;  // "" = the model's; fp32 | tf32 | bf16 | fp16
  int iters = 20;
  int warmup = 5;
  std::string json_path;
  std::string trace_path;
  bool check = false;
  int ranks = 1;
  bool loopback = false;
  unsigned long long seed = 1;
};

// Exit code: 0, or 3 when --check found a mismatch. Throws InputError (exit 2) for bad input, no
// GPU, or a build without the GPU runtime.
int run_measure(const RunArgs& args, const std::string& version);

}  // namespace moesim::cli
