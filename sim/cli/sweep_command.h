// `moesim sweep`: simulate a grid of configurations (a sweep YAML and/or flags) on all cores, with a
// progress bar on a terminal, and write CSV, JSON and a self-contained HTML report. Started under
// mpirun (in a build with MPI), the grid is sharded across the ranks (configuration i goes to rank
// i mod size) and rank 0 gathers the outcomes and writes the same files a single process would.
// Options are registered in main.cc (CLI11 stays out of this header).
#pragma once

#include <string>

#include "sim/cli/run_option_flags.h"

namespace moesim::cli {

struct SweepArgs {
  std::string grid_path;    // sweep YAML (kind: sweep); flags below override its axes
  std::string models;       // comma-separated paths
  std::string hardware;     // comma-separated paths
  std::string gpus;         // "8,16,32"
  std::string memory_limit;  // --memory-limit (memory_limit_flag.h): "" default, "none", or a size
  std::string tokens;       // "2048,4096": per GPU
  std::string global_tokens;  // instead of tokens: per step of the whole cluster
  std::string tp;           // "1,2,4,8"
  std::string chunks;       // "1-16"
  std::string strategies;   // "none,s4" or "all"
  std::string routing;      // "uniform"
  // The run options every configuration takes (sweep_fixed_keys(): --order, --network, --layers,
  // --no-dtd, --zero, ...), given on the command line over the grid file's.
  RunOptionFlags fixed;
  double step_target_ms = -1;  // < 0: the grid file's (default none)
  std::string csv_path;     // "-" = stdout
  std::string json_path;
  std::string html_path;
  int jobs = 0;             // 0 = every hardware thread
  bool timing = false;
};

int run_sweep_command(const SweepArgs& args, const std::string& version);

}  // namespace moesim::cli
