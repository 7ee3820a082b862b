// The MoE layer's memory-bound kernels as the simulator prices them once a calibration has timed
// them (`moesim calibrate`, runtime/bench/calibrate_kernels.h): an elementwise task of stage route,
// encode, act or decode (and the shared experts' and a recomputation's activation) costs
//   launch + (bytes_read + bytes_written) / bandwidth
// with the calibrated kernel's figures for the storage its tensors are in, instead of the launch
// gap plus bytes over the HBM bandwidth (compute_cost.h). On an H200 those kernels ran 1.3-10x the
// HBM model's time (docs/validation.md): a top-k per token or a scatter of rows is not a stream.
//
// The figures are fitted against the bytes the task graph counts for each kernel
// (sim/build/memory_kernel_traffic.h), so that the calibration measures in the same units as the
// graph prices.
#pragma once

#include <cstdint>
#include <optional>

#include "sim/graph/task.h"
#include "sim/graph/task_graph.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

// The calibrated kernel an elementwise task runs, by its stage and pass: route, encode, act and
// decode name their own; the shared experts' elementwise task (stage shared) is their activation;
// a recomputed forward task (stage recompute, id ...recompute.<op>...) is <op>'s forward kernel.
// None for other tasks.
std::optional<MemoryKernel> memory_kernel_of(const Task& task);

// The element size of a graph's stored tensors: the one every GEMM task shares; 0 when the graph
// has no GEMM or several sizes (its memory-bound kernels then keep the HBM model).
int stored_element_bytes(const TaskGraph& graph);

// The calibrated figures of kernel `k` on tensors of element_bytes: the fp32 ones for 4 bytes,
// bf16's (else fp16's) for 2; none without a calibration that timed it.
std::optional<KernelFigure> calibrated_kernel(const GpuSpec& gpu, MemoryKernel k, int element_bytes);

}  // namespace moesim
