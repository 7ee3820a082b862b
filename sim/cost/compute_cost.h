// ComputeCostModel: isolated (interference-free) duration of every non-collective task.
//
// GEMM by kernel shape (docs/concepts.md, "Cost models"): a tensor-core GEMM
// kernel cuts the output into CTA tiles of tm x tn (the GPU's gemm_tile for the dtype), each
// computed by one SM over the whole K, and runs them in waves of sm_count tiles:
//   tiles   = ceil(m / tm) * ceil(n / tn) * batch
//   waves   = ceil(tiles / sm_count)
//   tile    = 2 tm tn k / (peak(dtype) * gemm_efficiency(dtype) / sm_count) + gemm_tile_overhead
//   GEMM:   launch + max(waves * tile + reduction, bytes_moved / (hbm_bandwidth * hbm_efficiency))
// A GEMM thinner than the tile uses a side of its dimension rounded up to 16 (narrow-tile kernels).
// Tile choice: with the GPU's gemm_half_tile_efficiency r for the dtype, the library may also run
// tiles with one side halved (rate x r) or both (x r^2), as cuBLAS picks a smaller tile where the
// GPU's leaves a last wave nearly empty; the fastest of the four is taken. Without r, gemm_tile only.
// Split-K: with fewer output tiles than SMs, cuBLAS cuts K into s slices computed by s tiles each
// and sums their fp32 partials in a second kernel. The model takes the s in 1..sm_count / tiles
// (slices of at least 16) that minimises waves * tile(k / s) + launch + 2 s m n batch 4 B / HBM:
// more slices fill idle SMs but pay the per-tile overhead and the partials' traffic again.
// So a GEMM of sm_count + 1 tiles takes two waves, padding of ragged edges is paid, a small-M GEMM
// falls to the memory bound (its B matrix dominates the bytes) and a small-K GEMM pays the
// per-tile pipeline fill and epilogue (gemm_tile_overhead) over little main-loop work.
// When the GPU carries a calibration table for the GEMM's dtype, the measured time interpolated
// in log space (gemm_calibration.h) replaces all of it, launch gap included.
//   elementwise: launch + max(flops / peak(fp32), (read + written) / (hbm_bandwidth * hbm_efficiency)),
//                or, for a task of a memory-bound kernel the GPU's calibration timed in the graph's
//                storage, that kernel's launch + (read + written) / bandwidth (memory_kernels.h)
//   copy d2h/h2d: latency + bytes / effective PCIe bandwidth of that direction (copy engines: no
//                kernel launch)
//   copy d2d:    launch + 2 * bytes / (hbm_bandwidth * hbm_efficiency)   (read and write)
//   host:        its duration
// Durations are rounded to the nearest ns and never fall below 1 ns for nonzero work; a task with
// no work still pays its fixed costs (launch overhead or latency).
#pragma once

#include <cstdint>
#include <optional>

#include "sim/core/units.h"
#include "sim/graph/task.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

struct GemmWaves {
  GemmTile tile;  // the tile used: the GPU's, narrowed for a GEMM thinner than it
  std::int64_t tiles = 0;  // output tiles times the K slices (split_k)
  std::int64_t waves = 0;
  double tile_ns = 0;  // one tile's main loop over its K slice plus the per-tile overhead
  std::int64_t split_k = 1;   // K slices: > 1 when too few output tiles would leave SMs idle
  double reduction_ns = 0;    // summing the slices' fp32 partials (a kernel of its own)
  double compute_ns() const { return static_cast<double>(waves) * tile_ns + reduction_ns; }
};

class ComputeCostModel {
 public:
  // Throws InputError if the GPU has no usable HBM bandwidth. element_bytes: the size of the
  // graph's stored elements (stored_element_bytes), which picks the calibrated memory-bound
  // kernels' storage; 0 prices every elementwise task with the HBM model.
  explicit ComputeCostModel(const ClusterSpec& cluster, int element_bytes = 0);

  // Duration of a GEMM, elementwise, copy or host task; InternalError for a collective. Throws
  // InputError if the GPU has no peak for the GEMM's dtype (or fp32 for elementwise kernels).
  TimeNs isolated_duration(const Task& task) const;

  TimeNs gemm_duration(const GemmWork& work) const;
  // `kernel`: the memory-bound kernel the task runs (memory_kernel_of), if any.
  TimeNs elementwise_duration(const ElementwiseWork& work, std::optional<MemoryKernel> kernel = std::nullopt) const;
  TimeNs copy_duration(const CopyWork& work) const;
  TimeNs host_duration(const HostWork& work) const;

  // FLOP/s a GEMM achieves: flops / gemm_duration (so calibrated when the GPU is).
  double gemm_flop_rate(const GemmWork& work) const;

  // Tiles, waves and the time of one tile of a GEMM under the shape model (no calibration).
  // Throws InputError without an sm_count or a peak for the dtype.
  GemmWaves gemm_waves(const GemmWork& work) const;
  // Peak FLOP/s for a math dtype, or InputError naming the supported ones.
  double peak_flops(DType dtype) const;

 private:
  double hbm_bytes_per_ns() const;
  // gemm_waves with one tile shape, its main-loop rate scaled by `rate_factor`.
  GemmWaves tiled_waves(const GemmWork& work, GemmTile tile, double rate_factor) const;

  const ClusterSpec& cluster_;
  int element_bytes_;
};

// Rounds a duration in (fractional) ns to the nearest ns; at least 1 ns when `nonzero_work`.
TimeNs round_duration_ns(double ns, bool nonzero_work);

}  // namespace moesim
