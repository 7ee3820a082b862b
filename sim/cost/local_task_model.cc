#include "sim/cost/local_task_model.h"

#include <algorithm>
#include <variant>

#include "sim/cost/host_copy_model.h"
#include "sim/engine/interference.h"
#include "sim/cost/memory_kernels.h"

namespace moesim {

LocalTaskModel::LocalTaskModel(const TaskGraph& graph, const ClusterSpec& cluster)
    : graph_(graph), cluster_(cluster), cost_(cluster, stored_element_bytes(graph)) {}

bool LocalTaskModel::handles(const Task& task) const { return !task.is_collective() && !is_host_copy(task); }

double LocalTaskModel::factor(const Task& task, const Concurrency& concurrency) const {
  const InterferenceTable& table = cluster_.node.interference;
  const auto* gemm = std::get_if<GemmWork>(&task.work);
  // A tensor-core GEMM's output elements per SM pick its cell from the node's GEMM-size table (a
  // GPU file always gives sm_count >= 1). Measured on bf16 kernels; tf32, fp16 and fp8 take it as
  // cuBLAS runs them as the same persistent kernels of one CTA per SM (not measured). fp32 without
  // tensor cores runs other kernels and keeps the cell. On a loopback node the size is one virtual
  // rank's GEMM over the whole GPU's SMs (a simplification: they share them).
  const bool sized = gemm != nullptr && gemm->dtype != DType::kFp32;
  const double interference =
      sized && !table.gemm_with_communication.empty()
          ? gemm_interference_factor(table, task.stream, task.rank, concurrency,
                                     static_cast<double>(gemm->batch) * static_cast<double>(gemm->m) *
                                         static_cast<double>(gemm->n) / cluster_.node.gpu.sm_count)
          : interference_factor(table, task.stream, task.rank, concurrency);
  const bool comm = is_comm_stream(task.stream);
  if (!cluster_.node.loopback || comm) return interference;  // collectives count members, not tasks
  // Virtual ranks on one GPU: the k kernels running on its compute streams share its SMs, each
  // progressing at 1/k (processor sharing: the device's throughput is kept, not multiplied). The
  // count includes the task itself.
  return interference / static_cast<double>(std::max(1, concurrency.busy(task.rank, task.stream)));
}

void LocalTaskModel::start(TaskIndex task, TimeNs now, const Concurrency& concurrency) {
  const Task& t = graph_.task(task);
  activities_.add(task, cost_.isolated_duration(t), now, factor(t, concurrency));
}

void LocalTaskModel::on_concurrency_change(std::span<const int> ranks, TimeNs now,
                                           const Concurrency& concurrency) {
  for (TaskIndex i : activities_.running()) {
    const Task& t = graph_.task(i);
    if (!std::binary_search(ranks.begin(), ranks.end(), t.rank)) continue;
    activities_.set_rate(i, factor(t, concurrency), now);
  }
}

void LocalTaskModel::advance_to(TimeNs now, std::vector<TaskIndex>& finished) {
  activities_.advance_to(now, finished);
}

}  // namespace moesim
