// The bytes and FLOPs the MoE block's memory-bound tasks count (route, encode, activation,
// decode; forward and backward), written out as a formula of the layer's sizes. The runtime's
// kernel calibration (runtime/bench/calibrate_kernels.h) fits its measured times against these
// bytes, so that the fitted figures price the graph's tasks in the same units
// (sim/cost/memory_kernels.h); tests/sim/cost/memory_kernels_test.cc holds the formula to the
// tasks the block emits.
#pragma once

#include <cstdint>

#include "sim/graph/task.h"
#include "sim/spec/memory_kernel.h"

namespace moesim {

// One layer's sizes as a kernel sees them: `rows` token rows go to (and come back from) the
// experts (tokens x top_k when none is dropped); the activation reads fc1_out (hidden, or 2 x hidden
// for swiglu) and writes hidden per row.
struct KernelShape {
  std::int64_t tokens = 0;
  std::int64_t experts = 0;
  std::int64_t top_k = 1;
  std::int64_t d_model = 0;
  std::int64_t hidden = 0;
  std::int64_t fc1_out = 0;
  std::int64_t rows = 0;
};

// The traffic the task graph counts for kernel `k` at `shape` (elements of element_bytes each).
ElementwiseWork memory_kernel_traffic(MemoryKernel k, const KernelShape& shape, int element_bytes);

}  // namespace moesim
