// The memory-bound kernels of the MoE layer, timed one by one for a calibration file: route (the
// gate's softmax and top-k, with the capacity assignment in the forward), encode, activation and
// decode, forward and backward, exactly as the executor issues them (layer_executor.cc), at a few
// token counts per storage type. Each kernel's times are fitted to
//   t = launch + bytes / bandwidth
// where bytes are what the simulator's task graph counts for that kernel at that size
// (sim/build/memory_kernel_traffic.h), so that the fitted figures price the graph's tasks directly. The
// fit minimises the relative residuals (every size counts alike); an intercept below 0 is refitted
// through 0 (no fixed cost shows).
#pragma once

#include <map>
#include <vector>

#include "runtime/bench/calibrate.h"
#include "runtime/exec/device.h"
#include "sim/spec/memory_kernel.h"

namespace moesim::runtime {

struct LaunchBandwidthFit {
  double launch_ns = 0;     // >= 0
  double bytes_per_ns = 0;  // > 0
};

// Least squares in relative error over points (bytes[i], ns[i]). Throws InternalError with fewer
// than one point, sizes that do not differ for two or more, or a time that does not grow with the
// bytes (no bandwidth to fit): the timing is then not usable.
LaunchBandwidthFit fit_launch_and_bandwidth(const std::vector<double>& bytes, const std::vector<double>& ns);

// InputError for token counts that are not positive and strictly increasing, or a shape that is
// not one (top_k outside 1..experts, a capacity tokens x top_k / experts that is not whole).
void check_kernel_options(const CalibrationOptions& o);

// The figures of every kernel, per storage of options.dtypes (fp32 for fp32 and tf32, bf16, fp16).
std::map<DType, KernelFigures> measure_kernels(DeviceOps& device, const CalibrationOptions& options);

}  // namespace moesim::runtime
