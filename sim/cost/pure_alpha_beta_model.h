// PureAlphaBetaModel: every task costed by the linear alpha-beta model of PipeMoE (INFOCOM'23).
//
// Selected when the hardware file's `alpha_beta` section says `simulate: true` (see
// AlphaBetaCosts in hardware_spec.h). Durations, with x = bytes a rank sends in a collective
// (bytes_per_peer * group size; for an all-to-allv, the most any member sends or receives) and
// w = a GEMM's FLOP:
//   GEMM:                      a_g + b_g * w
//   collective (any op):       a_a + b_a * x
//   elementwise, device copy:  0   (the PipeMoE model has no term for them)
//   host <-> device copy:      the PCIe cost of ComputeCostModel (the model has none either, and
//                              offloading strategies must still pay for their traffic)
//   host:                      its duration
// Tasks run at full speed whatever else runs (the model assumes no interference). Together with
// the graph option that puts every collective of a rank on one stream, a simulated pipelined
// forward pass then takes exactly the model's T(r) = max(2*a_r + r*e_r, 2*r*a_r)
// (sim/search/pipemoe_model.h), up to the rounding of each task to whole nanoseconds.
#pragma once

#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "sim/cost/compute_cost.h"
#include "sim/engine/activity_model.h"
#include "sim/engine/rated_activities.h"
#include "sim/graph/task_graph.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

class PureAlphaBetaModel final : public ActivityModel {
 public:
  // The graph and cluster must outlive the model. InputError when the cluster has no alpha_beta
  // section.
  PureAlphaBetaModel(const TaskGraph& graph, const ClusterSpec& cluster);

  std::string_view name() const override { return "pure-alpha-beta"; }
  bool handles(const Task&) const override { return true; }
  void start(TaskIndex task, TimeNs now, const Concurrency& concurrency) override;
  void on_concurrency_change(std::span<const int>, TimeNs, const Concurrency&) override {}
  TimeNs next_completion() const override { return activities_.next_completion(); }
  void advance_to(TimeNs now, std::vector<TaskIndex>& finished) override;

  TimeNs isolated_duration(const Task& task) const;

 private:
  const TaskGraph& graph_;
  AlphaBetaCosts costs_;
  ComputeCostModel pcie_;
  RatedActivities activities_;
  // All-to-allv: the most bytes a member sends or receives, by traffic matrix.
  std::int64_t largest_member_bytes(const CollectiveWork& work) const;
  mutable std::map<std::shared_ptr<const TrafficMatrix>, std::int64_t> allv_bytes_;
};

}  // namespace moesim
