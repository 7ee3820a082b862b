// ComputeCostModel: isolated (interference-free) duration of every non-collective task.
//
// Roofline with a GEMM efficiency curve (design.md section 4):
//   GEMM:        launch + max(flops / (peak(dtype) * eff(m, n, k)),
//                             bytes_moved / (hbm_bandwidth * hbm_efficiency))
//                eff(m, n, k) = peak_fraction * s(m) * s(n) * s(k),  s(d) = d / (d + half_saturation_dim)
//                or, when the GPU carries a calibration table for the GEMM's dtype, the measured
//                time interpolated in log space (gemm_calibration.h), which includes the launch gap
//   elementwise: launch + max(flops / peak(fp32), (read + written) / (hbm_bandwidth * hbm_efficiency))
//   copy d2h/h2d: latency + bytes / effective PCIe bandwidth of that direction (copy engines: no
//                kernel launch)
//   copy d2d:    launch + 2 * bytes / (hbm_bandwidth * hbm_efficiency)   (read and write)
//   host:        its duration
// Durations are rounded to the nearest ns and never fall below 1 ns for nonzero work; a task with
// no work still pays its fixed costs (launch overhead or latency).
#pragma once

#include <cstdint>

#include "sim/core/units.h"
#include "sim/graph/task.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

class ComputeCostModel {
 public:
  // Throws InputError if the GPU has no usable HBM bandwidth.
  explicit ComputeCostModel(const ClusterSpec& cluster);

  // Duration of a GEMM, elementwise, copy or host task; InternalError for a collective. Throws
  // InputError if the GPU has no peak for the GEMM's dtype (or fp32 for elementwise kernels).
  TimeNs isolated_duration(const Task& task) const;

  TimeNs gemm_duration(const GemmWork& work) const;
  TimeNs elementwise_duration(const ElementwiseWork& work) const;
  TimeNs copy_duration(const CopyWork& work) const;
  TimeNs host_duration(const HostWork& work) const;

  // FLOP/s a GEMM achieves: flops / gemm_duration (so calibrated when the GPU is).
  double gemm_flop_rate(const GemmWork& work) const;

  // eff(m, n, k) of the default curve.
  double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k) const;
  // Peak FLOP/s for a math dtype, or InputError naming the supported ones.
  double peak_flops(DType dtype) const;

 private:
  double hbm_bytes_per_ns() const;

  const ClusterSpec& cluster_;
};

// Rounds a duration in (fractional) ns to the nearest ns; at least 1 ns when `nonzero_work`.
TimeNs round_duration_ns(double ns, bool nonzero_work);

}  // namespace moesim
