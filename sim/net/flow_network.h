// FlowNetwork: the flow-level, contention-aware collective model (design.md section 4).
//
// Collectives become plans of flows (collective_plan.h) over the cluster's link graph
// (topology.h). All flows in flight -- of every running collective -- share links max-min fairly
// (max_min.h); rates are recomputed only when a flow starts or ends, and then only for the flows
// linked to it through shared links (incremental_max_min.h), so between events every flow drains
// linearly and its completion is an exact integer ns. A collective progresses at the minimum interference factor of its
// simulated ranks (MPipeMoE Fig. 3), applied to its flows' max-min rates.
//
// FlowSimulator is the event core (no engine): it is driven by FlowNetwork (an ActivityModel, the
// engine's CollectiveModel) and runs plans alone for isolated_duration and `moesim collective`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "sim/graph/task_graph.h"
#include "sim/net/collective_model.h"
#include "sim/net/collective_plan.h"
#include "sim/net/incremental_max_min.h"
#include "sim/net/topology.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

class FlowSimulator {
 public:
  explicit FlowSimulator(const ClusterTopology& topo);

  // Starts plan `id` at `now`; the plan must outlive its run.
  void start(std::uint64_t id, std::shared_ptr<const CollectivePlan> plan, TimeNs now, double factor);
  void set_factor(std::uint64_t id, double factor, TimeNs now);
  TimeNs next_event() const;
  // Processes every event at `now` (<= next_event()) and appends the plans that ended, ascending.
  void advance_to(TimeNs now, std::vector<std::uint64_t>& finished);
  bool empty() const { return plans_.empty(); }
  std::size_t num_flows() const { return flows_.size(); }

  // Runs one plan alone from time 0 and returns its duration.
  static TimeNs run_alone(const ClusterTopology& topo, std::shared_ptr<const CollectivePlan> plan);

 private:
  struct Flow {
    std::uint64_t plan = 0;
    const FlowSpec* spec = nullptr;
    double remaining = 0;
    double rate = 0;
    TimeNs start_at = 0;  // when its phase launched it (it joins the max-min solve then)
    TimeNs drain_at = kNever;
    bool active = false;
    IncrementalMaxMin::Slot slot = 0;  // in rates_, while active
  };
  struct Running {
    std::shared_ptr<const CollectivePlan> plan;
    std::size_t phase = 0;
    int repeat_done = 0;
    int flows_left = 0;
    TimeNs local_end = kNever;  // end of the phase's local step, while it runs
    bool in_local = false;
    bool done = false;
    double factor = 1.0;
  };
  // Begins the current phase of `r` at `now` (its local step, or its flows).
  void begin_phase(std::uint64_t id, Running& r, TimeNs now);
  void launch_flows(std::uint64_t id, Running& r, TimeNs now);
  // Moves `r` on after its phase ended; returns true when the plan is done.
  bool phase_done(std::uint64_t id, Running& r, TimeNs now);
  void settle(TimeNs now);
  void recompute(TimeNs now);

  IncrementalMaxMin rates_;
  std::map<std::uint64_t, Running> plans_;
  std::vector<Flow> flows_;
  TimeNs last_update_ = 0;
  bool dirty_ = false;
};

struct FlowNetworkOptions {
  PlanOptions plan;
};

class FlowNetwork final : public CollectiveModel {
 public:
  // The graph and cluster must outlive the model. Throws InputError when the cluster has no
  // topology or the graph's world does not fit on it.
  FlowNetwork(const TaskGraph& graph, const ClusterSpec& cluster, FlowNetworkOptions options = {});

  std::string_view name() const override { return "flow"; }
  void start(TaskIndex task, TimeNs now, const Concurrency& concurrency) override;
  void on_concurrency_change(std::span<const int> ranks, TimeNs now,
                             const Concurrency& concurrency) override;
  TimeNs next_completion() const override { return sim_.next_event(); }
  void advance_to(TimeNs now, std::vector<TaskIndex>& finished) override;
  TimeNs isolated_duration(const CollectiveWork& work, const std::vector<int>& group) const override;

  const ClusterTopology& topology() const { return topo_; }

 private:
  std::shared_ptr<const CollectivePlan> plan_for(const CollectiveWork& work, const std::vector<int>& group) const;
  double factor(TaskIndex task, const Concurrency& concurrency) const;

  const TaskGraph& graph_;
  const ClusterSpec& cluster_;
  FlowNetworkOptions options_;
  ClusterTopology topo_;
  FlowSimulator sim_;
  std::map<TaskIndex, std::vector<int>> ranks_;
  // Plans and isolated durations, by (op, group, bytes per peer, traffic matrix, transposed): a
  // traffic matrix is identified by address (the graph's tasks share one per chunk); the key holds
  // it, so that address cannot be reused by another matrix while the entry exists.
  using PlanKey = std::tuple<int, std::vector<int>, std::int64_t, std::shared_ptr<const TrafficMatrix>, bool>;
  static PlanKey plan_key(const CollectiveWork& work, const std::vector<int>& group);
  mutable std::map<PlanKey, std::shared_ptr<const CollectivePlan>> plans_;
  mutable std::map<PlanKey, TimeNs> durations_;
};

}  // namespace moesim
