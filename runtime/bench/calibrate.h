// Calibration micro-benchmarks (`moesim calibrate`): measure on one device what the simulator's
// cost models take from a hardware file, and write it as a calibration file (kind: calibration,
// sim/spec/loader.h), the only way measurements reach the simulator (design.md lesson 11).
//
// Measured, each as back-to-back operations on one stream timed with events (warm-up first):
//   kernel launch gap   a one-element fill kernel, per kernel;
//   HBM bandwidth       a device-to-device copy: 2 x bytes / time (it reads and writes them);
//   PCIe per direction  pinned host <-> device copies: latency = per-copy time of a 64-byte copy,
//                       bandwidth = bytes / (time - latency) of a large copy;
//   GEMM times          every (m, n, k) of the grid, per math dtype, row-major A[m,k] B[k,n] in
//                       the dtype's storage, fp32 accumulation (the runtime's own GEMM path).
//   batched GEMM times  every (batch, m, n, k) of a second grid, per operand layout and math dtype:
//                       one strided-batched launch of `batch` such GEMMs, as the executor runs the
//                       expert GEMMs: nn in the forward, nt (B transposed) for data gradients, tn
//                       (A transposed) for weight gradients.
//   memory-bound kernels the MoE layer's own kernels (route, encode, activation, decode, forward
//                       and backward) at a few token counts per storage type, each fitted to
//                       launch + bytes / bandwidth (calibrate_kernels.h).
//   interference        MPipeMoE Fig. 3's cells that one GPU can show: a GEMM's speed while a
//                       host-to-device copy runs on another stream (computation with memcpy), that
//                       copy's speed while GEMMs run (memcpy with computation) and while a
//                       device-to-host copy runs (memcpy with memcpy). The background loop is issued
//                       first and lasts at least three times the timed window; factor = time alone /
//                       time with it, at most 1. Communication's cells need a collective between
//                       GPUs and keep the node's values.
//   device-copy collectives the loopback transport's all-to-all of p virtual ranks, per p fitted
//                       to launch + bytes / bandwidth, and its speed beside a GEMM
//                       (calibrate_device_copies.h).
// Each point repeats until it has run for at least min_time_ms (and min_reps times), so short
// kernels are averaged over many launches and long ones are not repeated needlessly.
//
// Written against DeviceOps: a GPU in `moesim calibrate`, a modelled device in the tests (which
// check that the measurement recovers the model's parameters).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/exec/device.h"
#include "sim/spec/hardware_spec.h"

namespace moesim::runtime {

struct CalibrationOptions {
  std::vector<DType> dtypes = {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16};
  // The m, n and k axes of every GEMM table: from a gate with 8 experts or a weight gradient over
  // a few rows to the largest layers.
  std::vector<std::int64_t> dims = {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  // The batched tables' axes: the batch (local experts; empty: no batched table) and one list
  // for m, n and k, from a chunk of a few rows per expert to the widest layers the memory allows
  // (three buffers of max batch x max dim^2 elements: 24 GiB in fp32 by default).
  std::vector<std::int64_t> batches = {2, 8, 32, 128};
  std::vector<std::int64_t> batched_dims = {16, 64, 256, 1024, 4096};
  // The operand layouts the batched grid is measured in (each a table of its own).
  std::vector<GemmLayout> batched_layouts = {GemmLayout::kNN, GemmLayout::kNT, GemmLayout::kTN};
  // The memory-bound kernels: timed at these token counts (empty: not timed) of one layer of
  // kernel_experts experts, top-kernel_top_k routing, kernel_d_model wide, kernel_hidden hidden
  // (gelu), capacity tokens x top_k / experts.
  std::vector<std::int64_t> kernel_tokens = {1024, 4096, 16384};
  std::int64_t kernel_experts = 64;
  int kernel_top_k = 2;
  std::int64_t kernel_d_model = 1024;
  std::int64_t kernel_hidden = 4096;
  // The device-copy collectives (calibrate_device_copies.h): the loopback transport's all-to-all
  // at these virtual rank counts (empty: not measured) and exchange sizes (the sum of all blocks;
  // at least two), in buffers of 2 x the largest (2 GiB by default).
  std::vector<std::int64_t> loopback_ranks = {1, 2, 4, 8};
  // On an H200 exchanges below about 128 MiB were bound by the host thread issuing the copies,
  // and fits that included them gave bandwidths above HBM's (docs/calibration.md).
  std::vector<std::int64_t> loopback_bytes = {128 << 20, 256 << 20, 512 << 20, 1 << 30};
  std::int64_t copy_bytes = 256ll << 20;  // the large copies (HBM, PCIe bandwidth)
  int warmup = 2;
  int min_reps = 3;
  int max_reps = 1000;
  double min_time_ms = 1.0;  // per point, unless max_reps come first
  // Progress lines for a run of minutes (every dtype, every 10% of its grid); may be empty.
  std::function<void(const std::string&)> progress;
};

struct CalibrationMeasurement {
  std::string device;  // DeviceOps::name()
  TimeNs kernel_launch_ns = 0;
  double hbm_bandwidth = 0;  // bytes/s
  LinkSpec pcie_h2d;         // bandwidth (efficiency 1) and latency
  LinkSpec pcie_d2h;
  std::map<DType, GemmTimeTable> gemm;
  BatchedGemmTables batched_gemm;           // per layout, then math dtype
  std::map<DType, KernelFigures> kernels;  // per storage dtype: fp32, bf16, fp16
  std::vector<InterferenceCell> interference;
  DeviceCopyFigures device_copies;  // empty by_ranks: not measured
};

// How many batched tables `m` holds, over every layout and dtype.
std::size_t batched_table_count(const CalibrationMeasurement& m);

// Runs every micro-benchmark on `device`. Throws InputError for empty or non-increasing dims
// (batches and kernel token counts may be empty: not measured), an empty dtype list or
// non-positive sizes, before touching the device.
CalibrationMeasurement calibrate(DeviceOps& device, const CalibrationOptions& options);

// The calibration file for GPU preset `gpu_name`; `provenance` goes into its header comment and
// `source:` (the command, the tool version, the date).
std::string calibration_yaml(const CalibrationMeasurement& m, const std::string& gpu_name,
                             const std::string& provenance);

}  // namespace moesim::runtime
