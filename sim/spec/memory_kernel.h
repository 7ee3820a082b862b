// The memory-bound kernels of the MoE layer that a calibration can time one by one (`moesim
// calibrate`, runtime/bench/calibrate_kernels.h): each stage's kernel in each pass. The simulator
// prices an elementwise task of these stages with the kernel's measured figures
// (sim/cost/memory_kernels.h) instead of bytes over the HBM bandwidth.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

#include "sim/core/units.h"

namespace moesim {

// route: softmax and top-k of the gate's logits (with the capacity assignment in the forward);
// encode / decode: the scatter of token rows to expert rows and the weighted gather back; act: the
// experts' activation between FC1 and FC2.
enum class MemoryKernel { kRouteFwd, kRouteBwd, kEncodeFwd, kEncodeBwd, kActFwd, kActBwd, kDecodeFwd, kDecodeBwd };
inline constexpr std::array<MemoryKernel, 8> kMemoryKernels = {
    MemoryKernel::kRouteFwd, MemoryKernel::kRouteBwd, MemoryKernel::kEncodeFwd, MemoryKernel::kEncodeBwd,
    MemoryKernel::kActFwd,   MemoryKernel::kActBwd,   MemoryKernel::kDecodeFwd, MemoryKernel::kDecodeBwd};

// "route_fwd", "act_bwd", ...: the keys of a calibration file's kernels section.
std::string_view to_string(MemoryKernel k);
std::optional<MemoryKernel> parse_memory_kernel(std::string_view s);

// A kernel's measured cost: launch_ns + bytes / bandwidth, where bytes are what the task graph
// counts for the kernel (bytes_read + bytes_written of its ElementwiseWork).
struct KernelFigure {
  TimeNs launch_ns = 0;    // fixed cost per launch, the gap between kernels included
  double bandwidth = 0;    // bytes/s, effective
};

using KernelFigures = std::map<MemoryKernel, KernelFigure>;

}  // namespace moesim
