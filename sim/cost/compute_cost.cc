#include "sim/cost/compute_cost.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/checked_math.h"
#include "sim/core/duration.h"
#include "sim/core/error.h"
#include "sim/cost/gemm_calibration.h"
#include "sim/cost/memory_kernels.h"

namespace moesim {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Rows (and columns) of the smallest tensor-core MMA tile (mma.sync m16n8k16).
constexpr std::int64_t kMmaSide = 16;

}  // namespace

TimeNs round_duration_ns(double ns, bool nonzero_work) {
  return to_duration_ns(ns, nonzero_work, "a kernel or copy");
}

ComputeCostModel::ComputeCostModel(const ClusterSpec& cluster, int element_bytes)
    : cluster_(cluster), element_bytes_(element_bytes) {
  const GpuSpec& gpu = cluster_.node.gpu;
  if (!(gpu.hbm_bandwidth > 0.0) || !(gpu.hbm_efficiency > 0.0)) {
    throw InputError(gpu.origin, "GPU " + gpu.name + " needs a positive hbm_bandwidth and hbm_efficiency");
  }
}

double ComputeCostModel::hbm_bytes_per_ns() const {
  const GpuSpec& gpu = cluster_.node.gpu;
  return gpu.hbm_bandwidth * gpu.hbm_efficiency / kNsPerS;
}

double ComputeCostModel::peak_flops(DType dtype) const {
  const GpuSpec& gpu = cluster_.node.gpu;
  auto it = gpu.peak_flops.find(dtype);
  if (it == gpu.peak_flops.end() || !(it->second > 0.0)) {
    std::string supported;
    for (const auto& [d, flops] : gpu.peak_flops) {
      if (!(flops > 0.0)) continue;
      if (!supported.empty()) supported += ", ";
      supported += std::string(to_string(d));
    }
    if (supported.empty()) supported = "none";
    throw InputError(gpu.origin, "GPU " + gpu.name + " has no " + std::string(to_string(dtype)) +
                                     " peak; supported: " + supported);
  }
  return it->second;
}

GemmWaves ComputeCostModel::gemm_waves(const GemmWork& work) const {
  const GpuSpec& gpu = cluster_.node.gpu;
  if (gpu.sm_count < 1) throw InputError(gpu.origin, "GPU " + gpu.name + " needs an sm_count to cost GEMMs");
  if (work.batch < 0 || work.m < 0 || work.n < 0 || work.k < 0)
    throw InputError("GEMM dimensions must not be negative");
  // The library's choice of tile (see the header): the GPU's, and with a gemm_half_tile_efficiency
  // for the dtype also the tiles with one or both sides halved, each halving at that fraction of
  // the rate.
  const GemmTile base = gpu.gemm_tile_for(work.dtype);
  GemmWaves best = tiled_waves(work, base, 1.0);
  if (const auto half = gpu.gemm_half_tile_efficiency.find(work.dtype); half != gpu.gemm_half_tile_efficiency.end()) {
    const double r = half->second;
    for (const auto& [tile, factor] : {std::pair{GemmTile{base.m / 2, base.n}, r}, std::pair{GemmTile{base.m, base.n / 2}, r},
                                       std::pair{GemmTile{base.m / 2, base.n / 2}, r * r}}) {
      if (tile.m < kMmaSide || tile.n < kMmaSide) continue;
      const GemmWaves w = tiled_waves(work, tile, factor);
      if (w.compute_ns() < best.compute_ns()) best = w;
    }
  }
  return best;
}

GemmWaves ComputeCostModel::tiled_waves(const GemmWork& work, GemmTile tile, double rate_factor) const {
  const GpuSpec& gpu = cluster_.node.gpu;
  // A GEMM narrower than the tile runs a narrow-tile kernel (cuBLAS and CUTLASS ship them for
  // skinny shapes): the side shrinks to the dimension rounded up to the 16 rows of an MMA
  // instruction instead of computing a full tile of padding.
  tile.m = std::min(tile.m, std::max<std::int64_t>(kMmaSide, ceil_div(work.m, kMmaSide) * kMmaSide));
  tile.n = std::min(tile.n, std::max<std::int64_t>(kMmaSide, ceil_div(work.n, kMmaSide) * kMmaSide));
  GemmWaves w;
  w.tile = tile;
  w.tiles = checked_mul(checked_mul(ceil_div(work.m, tile.m), ceil_div(work.n, tile.n)), work.batch);
  w.waves = ceil_div(w.tiles, gpu.sm_count);
  // One SM's share of the dtype's peak, at the main-loop efficiency; a tile computes its padded
  // m x n block over the whole K (the padding is wasted work, as on the GPU).
  const double sm_flops_per_ns =
      peak_flops(work.dtype) * gpu.gemm_efficiency_for(work.dtype) * rate_factor / gpu.sm_count / kNsPerS;
  const auto tile_ns = [&](std::int64_t k) {
    const double tile_flops = 2.0 * static_cast<double>(tile.m) * static_cast<double>(tile.n) * static_cast<double>(k);
    return tile_flops / sm_flops_per_ns + static_cast<double>(gpu.gemm_tile_overhead_ns);
  };
  w.tile_ns = tile_ns(work.k);
  // Split-K (see the header): only while output tiles leave SMs idle, slices of >= 16 of K.
  const std::int64_t output_tiles = w.tiles;
  const std::int64_t max_split =
      output_tiles > 0 ? std::min(gpu.sm_count / output_tiles, std::max<std::int64_t>(1, work.k / kMmaSide)) : 1;
  const double partial_bytes_per_slice = 2.0 * static_cast<double>(work.batch) * static_cast<double>(work.m) *
                                         static_cast<double>(work.n) * 4.0;  // fp32, written and read
  for (std::int64_t s = 2; s <= max_split; ++s) {
    GemmWaves split = w;
    split.split_k = s;
    split.tiles = output_tiles * s;
    split.waves = ceil_div(split.tiles, gpu.sm_count);
    split.tile_ns = tile_ns(ceil_div(work.k, s));
    split.reduction_ns = static_cast<double>(gpu.kernel_launch_ns) +
                         static_cast<double>(s) * partial_bytes_per_slice / hbm_bytes_per_ns();
    if (split.compute_ns() < w.compute_ns()) w = split;
  }
  return w;
}

TimeNs ComputeCostModel::gemm_duration(const GemmWork& work) const {
  const GpuSpec& gpu = cluster_.node.gpu;
  // A batched GEMM reads the batched table where the calibration has one (gemm_calibration.h).
  // The tables are measured with beta = 0 (C written only): a GEMM that accumulates into C also
  // reads it, added at the GPU's streaming bandwidth. That is C's traffic in full, as a GEMM bound
  // by it pays (an expert weight gradient over a few rows per expert: on an H200 the accumulating
  // chunks took 1.9x the first one's time); one bound by its arithmetic hides part of it.
  const double c_read_ns = work.accumulate ? static_cast<double>(work.c_bytes()) / hbm_bytes_per_ns() : 0.0;
  if (const BatchedGemmTable* batched = batched_table_for(gpu, work)) {
    return round_duration_ns(calibrated_gemm_ns(*batched, work) + c_read_ns, work.flops() > 0);
  }
  if (gpu.calibration) {
    const auto table = gpu.calibration->gemm.find(work.dtype);
    // A measured time already holds the launch gap and any memory-boundness: no roofline on top.
    if (table != gpu.calibration->gemm.end()) {
      return round_duration_ns(calibrated_gemm_ns(table->second, work) + c_read_ns, work.flops() > 0);
    }
  }
  const std::int64_t flops = work.flops();
  const std::int64_t bytes = work.bytes_moved();
  double compute_ns = 0.0;
  if (flops > 0) {
    compute_ns = gemm_waves(work).compute_ns();
  } else {
    peak_flops(work.dtype);  // a dtype the GPU lacks is an error even for an empty GEMM
  }
  const double memory_ns = static_cast<double>(bytes) / hbm_bytes_per_ns();
  const double ns = static_cast<double>(gpu.kernel_launch_ns) + std::max(compute_ns, memory_ns);
  return round_duration_ns(ns, flops > 0 || bytes > 0);
}

double ComputeCostModel::gemm_flop_rate(const GemmWork& work) const {
  MOESIM_CHECK(work.flops() > 0, "the FLOP rate of a GEMM without FLOPs");
  return static_cast<double>(work.flops()) / static_cast<double>(gemm_duration(work)) * kNsPerS;
}

TimeNs ComputeCostModel::elementwise_duration(const ElementwiseWork& work, std::optional<MemoryKernel> kernel) const {
  if (work.flops < 0 || work.bytes_read < 0 || work.bytes_written < 0)
    throw InputError("elementwise work must not be negative");
  if (kernel) {
    // The kernel's measured time holds its compute and its launch: no roofline on top.
    if (const auto fig = calibrated_kernel(cluster_.node.gpu, *kernel, element_bytes_)) {
      const auto bytes = static_cast<double>(checked_add(work.bytes_read, work.bytes_written));
      return round_duration_ns(static_cast<double>(fig->launch_ns) + bytes / fig->bandwidth * kNsPerS,
                               work.flops > 0 || bytes > 0);
    }
  }
  const double compute_ns =
      work.flops == 0 ? 0.0 : static_cast<double>(work.flops) / peak_flops(DType::kFp32) * kNsPerS;
  const std::int64_t bytes = checked_add(work.bytes_read, work.bytes_written);
  const double memory_ns = static_cast<double>(bytes) / hbm_bytes_per_ns();
  const double ns =
      static_cast<double>(cluster_.node.gpu.kernel_launch_ns) + std::max(compute_ns, memory_ns);
  return round_duration_ns(ns, work.flops > 0 || bytes > 0);
}

TimeNs ComputeCostModel::copy_duration(const CopyWork& work) const {
  if (work.bytes < 0) throw InputError("copy size must not be negative");
  const auto bytes = static_cast<double>(work.bytes);
  double ns = 0.0;
  if (work.direction == CopyDirection::kDeviceToDevice) {
    ns = static_cast<double>(cluster_.node.gpu.kernel_launch_ns) + 2.0 * bytes / hbm_bytes_per_ns();
  } else {
    const bool d2h = work.direction == CopyDirection::kDeviceToHost;
    const LinkSpec& link = d2h ? cluster_.node.pcie_d2h : cluster_.node.pcie_h2d;
    const double bw = link.effective_bandwidth();
    if (!(bw > 0.0)) {
      throw InputError(cluster_.node.origin, "node " + cluster_.node.name + " has no " +
                                                 (d2h ? "pcie_d2h" : "pcie_h2d") +
                                                 " bandwidth, needed by a " +
                                                 std::string(to_string(work.direction)) + " copy");
    }
    ns = static_cast<double>(link.latency_ns) + bytes / bw * kNsPerS;
  }
  return round_duration_ns(ns, work.bytes > 0);
}

TimeNs ComputeCostModel::host_duration(const HostWork& work) const {
  if (work.duration_ns < 0) throw InputError("host work duration must not be negative");
  return work.duration_ns;
}

TimeNs ComputeCostModel::isolated_duration(const Task& task) const {
  struct Visitor {
    const ComputeCostModel& m;
    TimeNs operator()(const GemmWork& w) const { return m.gemm_duration(w); }
    const Task& task;
    TimeNs operator()(const ElementwiseWork& w) const { return m.elementwise_duration(w, memory_kernel_of(task)); }
    TimeNs operator()(const CopyWork& w) const { return m.copy_duration(w); }
    TimeNs operator()(const HostWork& w) const { return m.host_duration(w); }
    TimeNs operator()(const CollectiveWork&) const {
      throw InternalError("ComputeCostModel asked for the duration of a collective");
    }
  };
  return std::visit(Visitor{*this, task}, task.work);
}

}  // namespace moesim
