#include "sim/cost/memory_kernels.h"

#include <string>
#include <vector>


namespace moesim {
namespace {

std::optional<MemoryKernel> kernel_of_op(std::string_view op, bool backward) {
  if (op == "route") return backward ? MemoryKernel::kRouteBwd : MemoryKernel::kRouteFwd;
  if (op == "encode") return backward ? MemoryKernel::kEncodeBwd : MemoryKernel::kEncodeFwd;
  if (op == "act" || op == "shared") return backward ? MemoryKernel::kActBwd : MemoryKernel::kActFwd;
  if (op == "decode") return backward ? MemoryKernel::kDecodeBwd : MemoryKernel::kDecodeFwd;
  return std::nullopt;
}

}  // namespace

std::optional<MemoryKernel> memory_kernel_of(const Task& task) {
  if (!std::holds_alternative<ElementwiseWork>(task.work)) return std::nullopt;
  if (task.stage != "recompute") return kernel_of_op(task.stage, task.pass == Pass::kBackward);
  // L0.bwd.recompute.act.c1: the forward's kernel, run again in the backward pass.
  const std::string_view id = task.id;
  const std::size_t at = id.find(".recompute.");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view op = id.substr(at + 11);
  op = op.substr(0, op.find('.'));
  return kernel_of_op(op, false);
}

int stored_element_bytes(const TaskGraph& graph) {
  int bytes = 0;
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const auto* g = std::get_if<GemmWork>(&graph.task(i).work);
    if (!g) continue;
    if (bytes != 0 && g->element_bytes != bytes) return 0;
    bytes = g->element_bytes;
  }
  return bytes;
}

std::optional<KernelFigure> calibrated_kernel(const GpuSpec& gpu, MemoryKernel k, int element_bytes) {
  if (!gpu.calibration) return std::nullopt;
  std::vector<DType> storages;
  if (element_bytes == 4) storages = {DType::kFp32};
  if (element_bytes == 2) storages = {DType::kBf16, DType::kFp16};
  for (DType d : storages) {
    const auto figures = gpu.calibration->kernels.find(d);
    if (figures == gpu.calibration->kernels.end()) continue;
    const auto f = figures->second.find(k);
    if (f != figures->second.end()) return f->second;
  }
  return std::nullopt;
}

}  // namespace moesim
