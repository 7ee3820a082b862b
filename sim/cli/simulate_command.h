// `moesim simulate` and `moesim graph export|check`: one training step of MoE layers simulated (a
// summary, and on request a JSON report, a Perfetto trace and the text timeline), or its task
// graph written or checked as JSON. The options are registered in main.cc (CLI11 stays out of
// this header); this is what they fill and the commands that run on them.
#pragma once

#include <functional>
#include <string>

#include "sim/cli/layout_flags.h"
#include "sim/cli/run_option_flags.h"

namespace moesim::cli {

struct StepArgs {
  // Whether a flag was on the command line: a run file's value gives way only to those.
  std::function<bool(const char*)> given;
  std::string run_path;
  std::string model_path;
  std::string hardware_path;
  std::string calibration_path;
  RunOptionFlags options;  // the run options' flags (sim/spec/run_options.h)
  bool all_ranks = false;
  bool loopback = false;
  long long gpus = 0;   // --gpus: the cluster preset grown or shrunk to this many GPUs (0 = as the file says)
  std::string memory_limit;  // --memory-limit (memory_limit_flag.h): "" default, "none", or a size
  long long nodes = 0;  // --nodes: ... to this many nodes
  // The run: the run file's (or the defaults) with the flags given applied; set by the command.
  RunSpec run;
};


struct SimulateOutputs {
  std::string json_path;  // "" = none, "-" = stdout (the summary then goes to stderr)
  std::string trace_path;
  std::string timeline_path;
  std::string html_path;  // the whole step's HTML report (--global-batch only)
  bool timing = false;
};

int run_simulate(StepArgs& args, const SimulateOutputs& outputs, const std::string& version);
int run_graph_export(StepArgs& args, const std::string& out_path);
int run_graph_check(const std::string& path);

}  // namespace moesim::cli
