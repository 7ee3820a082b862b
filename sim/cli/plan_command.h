// `moesim plan`: rank every (pipeline degree n, memory strategy) configuration for a model on a
// cluster, compare the selection methods, and with --fit find the smallest cluster that works.
// The options are registered in main.cc (CLI11 stays out of this header); this is
// what they fill and the command that runs on them. Algorithms live in sim/search/planner.h,
// formats in sim/report/plan_report.h.
#pragma once

#include <string>

#include "sim/cli/run_option_flags.h"

namespace moesim::cli {

struct PlanArgs {
  std::string model_path;
  std::string hardware_path;
  long long gpus = 0;   // --gpus / --nodes: the preset's size changed (cluster_flags.h)
  std::string memory_limit;  // --memory-limit (memory_limit_flag.h): "" default, "none", or a size
  long long nodes = 0;
  std::string calibration_path;  // empty: none
  std::string tokens;              // "4096" or "2048,4096,8192"
  std::string chunks;              // "" = 1..min(16, capacity); "1-8", "1,2,4,8"
  std::string strategies = "all";  // "all" or "none,s1,..."
  std::string objective = "time";
  std::string method = "simulate";  // one method or "all"
  // --ep, --tp: one degree each for the MoE-layer plan (parsed there: 0 = every GPU / tp, and 1);
  // with --global-batch the values the layout plan tries, lists (empty: every legal one).
  std::string ep;
  std::string tp;
  // The run options plan takes as simulate does (plan_option_keys(): --order, --network, --routing,
  // --seed, --no-dtd, --zero, ...; sim/spec/run_options.h).
  RunOptionFlags options;
  std::string json_path;           // "-" = stdout (the table then goes to stderr)
  int jobs = 0;                    // 0 = every hardware thread
  bool fit = false;
  int max_nodes = 64;
  double max_step_ms = 0;          // 0 = no target
};

// The keys of the run options `moesim plan` takes as flags.
const std::vector<std::string>& plan_option_keys();

int run_plan(const PlanArgs& args, const std::string& version);

}  // namespace moesim::cli
