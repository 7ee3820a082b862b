// HostCopyModel: the activity model of host <-> device copies (offloads and prefetches).
//
// A copy first pays the PCIe latency of its direction (pcie.latency: the DMA's setup, no
// bandwidth), then moves its bytes as a flow over HostLinks (host_links.h): the GPU's own link of
// that direction, the PCIe switches' links up to the CPU when the node has a topology, and the
// host memory. All copies in flight share those links max-min fairly (MaxMinSolver of sim/net,
// the flow model's sharing), recomputed whenever a copy starts moving bytes or ends, or an
// interference factor changes; between those events every copy drains linearly, so completions
// are exact integer ns (RatedActivities). Consequences:
//   - D2H and H2D use different links, so they overlap at full rate (the GPU's copy engines of
//     the two directions are separate); they meet only in host memory;
//   - a GPU runs at most pcie.copy_engines copies per direction at once (a loopback GPU's
//     virtual ranks, several copy streams); more wait, in the order they started, for an engine,
//     and pay their latency when they get one; the trace starts a copy when it gets its engine,
//     as the events of a copy engine's stream time it (EngineObserver::on_task_served);
//   - copies of the GPUs behind one PCIe switch share its uplink, and all GPUs of a CPU share its
//     memory.
// Interference (MPipeMoE Fig. 3): the memcpy factor of the copy's stream on its rank scales the
// GPU's own link (its DMA engines run slower while kernels and collectives run), so a neighbour
// behind the same switch may use what it leaves.
// Representative ranks: when the graph simulates only some ranks of its world (balanced routing:
// every rank does the same work), the others copy the same bytes at the same time. Rank g of the
// world that is not simulated repeats simulated rank (g mod S) of the S simulated ones; its copies
// are folded into that rank's flow as weights on the shared links they cross (a switch uplink
// carrying two such GPUs counts the flow twice), as the flow model aggregates symmetric flows: the
// class runs at the rate of its most constrained member. GPUs outside the graph's world (other
// data-parallel replicas) copy nothing here.
// Isolated duration (ComputeCostModel::copy_duration, for the planner and the engine-free costs):
// latency + bytes / per-GPU PCIe rate, which this model reproduces when nothing else copies.
#pragma once

#include <array>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/cost/host_links.h"
#include "sim/engine/activity_model.h"
#include "sim/engine/rated_activities.h"
#include "sim/graph/task_graph.h"
#include "sim/net/max_min.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

// Whether a task is a host <-> device copy (the tasks HostCopyModel handles).
bool is_host_copy(const Task& task);

class HostCopyModel final : public ActivityModel {
 public:
  // The graph and cluster must outlive the model. A copy over a link of no bandwidth (a node
  // without a PCIe rate or host memory) is refused with an InputError when it starts.
  HostCopyModel(const TaskGraph& graph, const ClusterSpec& cluster);

  std::string_view name() const override { return "host_copy"; }
  bool handles(const Task& task) const override { return is_host_copy(task); }
  void start(TaskIndex task, TimeNs now, const Concurrency& concurrency) override;
  void on_concurrency_change(std::span<const int> ranks, TimeNs now,
                             const Concurrency& concurrency) override;
  TimeNs next_completion() const override;
  void advance_to(TimeNs now, std::vector<TaskIndex>& finished) override;
  // The copies that waited for an engine and got one (their trace start).
  void take_served(std::vector<std::pair<TaskIndex, TimeNs>>& served) override;

  // Bytes per ns a copy moving bytes gets now; InternalError when it is not moving bytes.
  double rate_bytes_per_ns(TaskIndex task) const;

 private:
  struct Copy {
    int device = 0;
    int dir = 0;            // HostLinks::dir_index
    HostLinks::Link own = 0;  // the GPU's own link of that direction
    double factor = 1.0;    // interference factor of its stream on its rank
    TimeNs moving_at = -1;  // when its latency ends; -1 while it waits for an engine
  };
  // Copies of the GPUs a simulated rank stands for, per shared link: rank -> dir -> links.
  using Weights = std::vector<WeightedLink>;
  // Builds the links and the representative ranks' weights, on the first copy only: a step
  // without copies (strategy none) pays nothing for them.
  void prepare();
  void engage(TaskIndex task, TimeNs now);
  void begin_moving(TaskIndex task, TimeNs now);
  void share_links(TimeNs now);
  // A link a copy crosses: its weight and capacity (bytes per ns; the GPU's own link at the copy's
  // interference factor: its DMA engines slow down, the links behind it do not).
  struct Crossed {
    HostLinks::Link link;
    double weight;
    double capacity;
  };
  // The copy's own link first, then the shared path of its GPU and direction.
  std::vector<Crossed> crossed_links(TaskIndex task) const;
  // The max-min rate of a copy moving alone (bytes per ns): the lowest capacity / weight over the
  // links it crosses, the weights of a link crossed twice summed in order, as the solver does.
  double alone_rate(TaskIndex task) const;
  double factor_of(const Task& task, const Concurrency& concurrency) const;

  const TaskGraph& graph_;
  const ClusterSpec& cluster_;
  std::optional<HostLinks> links_;
  std::map<int, std::array<Weights, 2>> shared_;      // per simulated rank and direction
  std::map<TaskIndex, Copy> copies_;                  // started and not finished
  std::map<std::pair<int, int>, int> engaged_;        // (device, dir) -> copies holding an engine
  std::map<std::pair<int, int>, std::deque<TaskIndex>> waiting_;
  std::vector<std::pair<TaskIndex, TimeNs>> served_;  // engaged after a wait, not yet taken
  RatedActivities moving_;                            // work: bytes at the GPU's own rate
};

}  // namespace moesim
