// `moesim collective`: one simulated collective over a size range, printed as nccl-tests prints
// its results, so that it can be held against the nccl-tests logs of a real cluster.
//
// Columns (out-of-place only: a simulation has no in-place variant): size (B), count (float
// elements), type, redop, root, time (us), algbw (GB/s), busbw (GB/s), #wrong (N/A), and for
// all-reduce, all-gather and reduce-scatter the algorithm/protocol NCCL's choice takes (`nccl
// chose`, sim/net/nccl_model.h; `-` when no network is crossed). As in
// nccl-tests: size is the per-rank buffer (all-to-all: the per-rank total; all-gather: the
// gathered output; reduce-scatter: the input), algbw = size / time, busbw = algbw x (n-1)/n, and
// x 2(n-1)/n for all-reduce. Sizes go from min to max by a factor (nccl-tests -f), each rounded
// down to a multiple of 4n bytes so that every rank holds whole float elements.
//
// With --against LOG it simulates, instead of a size range, every row of an nccl-tests log of a
// real cluster (the collective from the log's test, the ranks placed on the cluster's GPUs as the
// log's "#  Rank" lines say: sim/driver/network_calibration.h, gpus_of_log) and prints the
// measured and simulated out-of-place times side by side, with the difference per size and the
// worst and mean over the log.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace moesim::cli {

struct CollectiveArgs {
  std::string hardware_path;
  std::string op = "all-to-all";
  int ranks = 0;  // 0 = every GPU of the cluster
  std::string min_bytes = "1M";
  std::string max_bytes = "1G";
  int step_factor = 2;
  std::string network = "auto";
  std::string a2a = "pairwise";
  std::string calibration_path;  // a calibration file applied to the hardware (e.g. its network)
  std::string against_log;       // an nccl-tests log to hold the simulation against
  bool op_given = false;         // --op was on the command line (a log names its own collective)
  bool against_given = false;    // --against was on the command line (even as '')
};


// Runs the command; throws InputError for bad arguments. Returns the exit code.
int run_collective(const CollectiveArgs& args, std::ostream& out);

}  // namespace moesim::cli
