// LocalTaskModel: the activity model of every task that is neither a collective nor a host <->
// device copy (GEMM, elementwise, device-to-device copy, host); host copies share PCIe links in
// HostCopyModel (host_copy_model.h).
//
// A task's isolated duration comes from ComputeCostModel; while it runs it progresses at the
// interference factor of its stream on its rank (MPipeMoE Fig. 3, see sim/engine/interference.h; a GEMM
// beside communication by its size where the node has a GEMM-size table), recomputed
// whenever the engine reports that the rank's busy stream classes changed. On a loopback node
// (virtual ranks sharing one GPU) the interference is that of the whole device, and the kernels
// running on its compute streams share it equally.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "sim/cost/compute_cost.h"
#include "sim/engine/activity_model.h"
#include "sim/engine/rated_activities.h"
#include "sim/graph/task_graph.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

class LocalTaskModel final : public ActivityModel {
 public:
  // The graph and cluster must outlive the model.
  LocalTaskModel(const TaskGraph& graph, const ClusterSpec& cluster);

  std::string_view name() const override { return "local"; }
  bool handles(const Task& task) const override;
  void start(TaskIndex task, TimeNs now, const Concurrency& concurrency) override;
  void on_concurrency_change(std::span<const int> ranks, TimeNs now,
                             const Concurrency& concurrency) override;
  TimeNs next_completion() const override { return activities_.next_completion(); }
  void advance_to(TimeNs now, std::vector<TaskIndex>& finished) override;

  const ComputeCostModel& cost() const { return cost_; }

 private:
  double factor(const Task& task, const Concurrency& concurrency) const;

  const TaskGraph& graph_;
  const ClusterSpec& cluster_;
  ComputeCostModel cost_;
  RatedActivities activities_;
};

}  // namespace moesim
