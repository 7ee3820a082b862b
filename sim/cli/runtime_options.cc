#include "sim/cli/runtime_options.h"

#include <CLI/CLI.hpp>

#include <cstdint>

#include "sim/cli/cli11_validators.h"
#include "sim/spec/run_spec.h"

namespace moesim::cli {
namespace {

constexpr std::uint64_t kMaxSteps = 1000000;  // run --iters, --warmup
constexpr std::uint64_t kMaxDevice = 1023;    // a GPU ordinal

}  // namespace

const std::vector<std::string>& run_command_option_keys() {
  static const std::vector<std::string> keys{"tokens_per_gpu", "num_chunks", "num_moe_layers", "strategy",
                                             "order",          "slots",      "seed"};
  return keys;
}

CLI::App* add_run(CLI::App& app, RunArgs& a) {
  CLI::App* run_cmd = app.add_subcommand(
      "run", "measure one step of the MoE layer on GPUs next to the simulator's prediction (docs/runtime.md)");
  run_cmd->add_option("--model", a.model_path, "model preset YAML")->required();
  run_cmd->add_option("--hardware", a.hardware_path, "cluster, node or GPU YAML (for the prediction)")->required();
  run_cmd->add_option("--calibration", a.calibration_path,
                      "calibration YAML of this GPU, for the prediction (`moesim calibrate`)");
  RunOptionFlagStyle style;
  style.notes["num_moe_layers"] = "; run: each with its own parameters";
  style.notes["seed"] = "; run: also the seed of the inputs and parameters";
  add_run_option_flags(run_cmd, a.options, run_command_option_keys(), style);
  run_cmd->add_option("--dtype", a.dtype, "storage and GEMM dtype: fp32|tf32|bf16|fp16 (default: the model's)");
  run_cmd->add_option("--iters", a.iters, "timed steps")->transform(whole(1, kMaxSteps))->capture_default_str();
  run_cmd->add_option("--warmup", a.warmup, "untimed steps first")
      ->transform(whole(0, kMaxSteps))->capture_default_str();
  run_cmd->add_option("--json", a.json_path, "write the measured report as JSON ('-' for stdout)");
  run_cmd->add_option("--trace", a.trace_path, "write a Chrome/Perfetto trace of the median step");
  run_cmd->add_flag("--check", a.check, "also check the numerics against the CPU reference at a small size");
  run_cmd->add_option("--ranks", a.ranks, "expert-parallel ranks (GPUs of this process, or virtual with --loopback)")
      ->transform(whole(1, kMaxGroupSize))
      ->capture_default_str();
  run_cmd->add_flag("--loopback", a.loopback, "run every rank on GPU 0 (all-to-all as device copies)");
  return run_cmd;
}

CLI::App* add_calibrate(CLI::App& app, CalibrateArgs& a) {
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "measure this GPU's launch gap, HBM, PCIe and GEMM times, or fit the network to an all-to-all (an "
      "nccl-tests log with --alltoall-log, or --collectives), or NCCL's all-reduce terms to an all_reduce_perf log "
      "(--allreduce-log), into a calibration file (docs/calibration.md)");
  calibrate->add_option("--hardware", a.hardware_path,
                        "the node or GPU preset of this GPU (its name goes into the file); for a log across nodes, "
                        "a cluster of them")
      ->required();
  CLI::Option* cal_output = calibrate->add_option("--output,-o", a.out_path,
                                                  "calibration YAML to write (e.g. hardware/calibration/<gpu>.yaml)");
  // --output is every command's name for its main artefact; --out was calibrate's own.
  calibrate->add_option("--out", a.out_path, "deprecated: the old name of --output")->excludes(cal_output);
  calibrate->add_option("--dtypes", a.dtypes, "GEMM dtypes, comma-separated (default: every dtype the preset's GPU has)");
  calibrate->add_option("--dims", a.dims, "GEMM m, n and k axis, increasing (default 8,16,...,16384)");
  calibrate->add_option("--batches", a.batches,
                        "batched GEMM table's batch axis, increasing, from 2 (default 2,8,32,128; none: no batched table)");
  calibrate->add_option("--batched-dims", a.batched_dims,
                        "batched GEMM table's m, n and k axis, increasing (default 16,64,256,1024,4096)");
  calibrate->add_option("--kernel-tokens", a.kernel_tokens,
                        "token counts the memory-bound kernels are timed at, increasing (default 1024,4096,16384; none: "
                        "not timed)");
  calibrate->add_option("--loopback-ranks", a.loopback_ranks,
                        "virtual rank counts the loopback all-to-all (device copies) is timed at, increasing, at most "
                        "64 (default 1,2,4,8; none: not timed)");
  calibrate->add_option("--loopback-bytes", a.loopback_bytes,
                        "bytes of the loopback all-to-all (the sum of its blocks), increasing, at least two (K, M, "
                        "G; default 128M,256M,512M,1G)");
  calibrate->add_option("--copy-size", a.copy_size, "bytes of the large copies (K, M, G)")->capture_default_str();
  calibrate->add_option("--min-time-ms", a.min_time_ms, "each point repeats for at least this long (at most 1000 times)")
      ->transform(real(0, 10000, true))
      ->capture_default_str();
  CLI::Option* cal_device = calibrate->add_option("--device", a.device, "GPU ordinal")
      ->transform(whole(0, kMaxDevice))->capture_default_str();
  CLI::Option* cal_log = calibrate->add_option(
      "--alltoall-log", a.alltoall_log,
      "an nccl-tests alltoall_perf log: fit the node's intra-node network to it (GPUs of one node) or the "
      "cluster's inter-node network (GPUs on several nodes) instead of measuring this GPU (no GPU needed)");
  CLI::Option* cal_allreduce = calibrate->add_option(
      "--allreduce-log", a.allreduce_log,
      "an nccl-tests all_reduce_perf log of --hardware's GPUs: fit NCCL's ring and tree terms (hop latency, "
      "efficiency) to it instead of measuring this GPU (no GPU needed)");
  calibrate->add_option("--ranks", a.ranks,
                        "with --alltoall-log or --allreduce-log: the GPUs the log ran on, if it has no '#  Rank' "
                        "lines; with "
                        "--collectives: measure the first N GPUs (default all)")->transform(whole(0, kMaxGroupSize));
  CLI::Option* cal_coll = calibrate->add_flag(
      "--collectives", a.collectives,
      "measure the all-to-all between every GPU this process sees (NCCL) and fit the node's intra-node network to it");
  calibrate->add_option("--base", a.base_path,
                        "a calibration of the node (its GPU; for a log across nodes, also its intra-node network) "
                        "to write out with the fitted sections added");
  calibrate->add_flag(
      "--force", a.force,
      "with --alltoall-log or --allreduce-log: fit a log whose ranks name another GPU than --hardware's, or "
      "other ranks or nodes than it has (--alltoall-log: one host's log, other than the node's GPUs) (refused otherwise)");
  for (const char* gpu_only :
       {"--dtypes", "--dims", "--batches", "--batched-dims", "--kernel-tokens", "--loopback-ranks", "--loopback-bytes",
        "--copy-size", "--min-time-ms"}) {
    cal_log->excludes(calibrate->get_option(gpu_only));
    cal_coll->excludes(calibrate->get_option(gpu_only));
    cal_allreduce->excludes(calibrate->get_option(gpu_only));
  }
  cal_log->excludes(cal_device);
  cal_coll->excludes(cal_device);
  cal_allreduce->excludes(cal_device);
  cal_coll->excludes(cal_log);
  cal_allreduce->excludes(cal_log);
  cal_allreduce->excludes(cal_coll);
  return calibrate;
}

}  // namespace moesim::cli
