// `moesim calibrate`: run the calibration micro-benchmarks (runtime/bench/calibrate.h) on one GPU,
// or with --alltoall-log fit the node's intra-node network to an nccl-tests all-to-all log
// (sim/driver/network_calibration.h), or with --allreduce-log NCCL's ring and tree terms to an
// all-reduce log (sim/driver/all_reduce_calibration.h), and write the calibration file that `--calibration` or a
// node file's `calibration:` key feeds to the simulator. The file is loaded back and applied to the named preset before the command
// succeeds, so a file it writes is always one the simulator accepts. On a build without the GPU
// runtime the command exists and exits 2 saying so.
#pragma once

#include <string>

namespace moesim::cli {

struct CalibrateArgs {
  std::string hardware_path;  // the preset whose GPU this is (its name goes into the file)
  std::string out_path;
  std::string dtypes;         // "" = every dtype the preset's GPU has a peak for
  std::string dims;           // "" = the default grid (CalibrationOptions::dims)
  // The batched GEMM grid's batch axis and its m, n, k axis, and the memory-bound kernels' token
  // counts: "" = CalibrationOptions' defaults; "none" = not measured (batches, kernel_tokens).
  std::string batches;
  std::string batched_dims;
  std::string kernel_tokens;
  // The device-copy collectives: the loopback all-to-all's virtual rank counts ("none": not
  // measured) and bytes per peer (sizes with K, M, G); "" = the defaults.
  std::string loopback_ranks;
  std::string loopback_bytes;
  std::string copy_size = "256M";
  double min_time_ms = 1.0;
  int device = 0;
  std::string command_line;   // recorded in the file
  bool out_given = false;     // the deprecated --out was used (a note says so)
  // Network calibration instead of a GPU measurement (no GPU needed): an nccl-tests alltoall_perf
  // log of GPUs of one node, its rank count when the log does not list its ranks, and optionally a
  // calibration of the node's GPU that the network sections are added to.
  std::string alltoall_log;
  // ... or an nccl-tests all_reduce_perf log: NCCL's ring and tree terms fitted to it
  // (sim/driver/all_reduce_calibration.h).
  std::string allreduce_log;
  int ranks = 0;
  std::string base_path;
  bool force = false;  // fit a log of other GPUs, or of other ranks or nodes, than the preset (a note says so)
  // Network calibration measured here: the all-to-all between the first `ranks` GPUs of this
  // process (all when 0), through NCCL.
  bool collectives = false;
};

// Exit code 0. Throws InputError (exit 2) for bad input, no GPU, or a build without the GPU runtime.
int run_calibrate(const CalibrateArgs& args, const std::string& version);

}  // namespace moesim::cli
