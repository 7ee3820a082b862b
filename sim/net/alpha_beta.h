// AlphaBetaNetwork: the alpha-beta (latency + bytes / bandwidth) collective model.
//
// Ranks are placed node-major (node = rank / gpus_per_node). b = bytes_per_peer, p = group size,
// link bandwidths are effective (line rate x efficiency). Latencies and algorithms are NCCL's
// (sim/net/nccl_model.h, constants in the node file's `nccl:` section).
//   all-to-all: latency(all-to-all) + max over members r of max(t_intra(r), t_inter(r)), with
//     t_intra = max(bytes r sends, bytes r receives within its node) / intra_bw, t_inter the same
//     across nodes / inter_bw (NVLink and the NIC work concurrently; the part a rank keeps is a
//     local copy hidden behind these), and latency = NCCL's Simple base latency + one latency per
//     round of peers (intra_node.latency, or inter_node.latency when a pair of the round crosses
//     nodes); a pair without bytes (all-to-allv) adds no latency, and nothing moving costs 0.
//     p = 1:  a device-to-device copy, launch + 2b / (hbm_bandwidth * hbm_efficiency)
//   device-copy collectives (p = 1, and below on a loopback node) of a GPU whose calibration
//     measured them (sim/net/device_copy_cost.h): all-to-all(v) launch(p) + 2 * (sum of all pair
//     bytes) / bandwidth(p); ring steps * launch(p) / p + 2 * steps * S / bandwidth(p)
//   loopback node (virtual ranks on one GPU, the runtime's loopback transport): every block, own
//     included, is a device copy on the receiver's stream; receivers copy in parallel, p copies each:
//       all-to-all(v):  max(c * launch, p * launch + 2 * (sum of all pair bytes) / (hbm_bandwidth *
//                       hbm_efficiency)), c = the non-empty blocks (p^2 for all-to-all), all issued by
//                       one host thread
//       ring:           steps * launch + 2 * steps * S / (hbm_bandwidth * hbm_efficiency)
//     and the collectives running at once share the GPU's memory: each progresses at 1/k.
//   all-reduce, all-gather, reduce-scatter (S = b * p): NCCL's estimate of the algorithm (ring, or
//     tree for all-reduce) and protocol (LL, LL128, Simple) it chooses for S:
//     latency + traffic / (bandwidth x protocol efficiency), nccl_model.h.
// While it runs, a collective's bytes progress at the minimum interference factor over its
// simulated ranks (MPipeMoE Fig. 3, see sim/engine/interference.h); NCCL's latency elapses first, at
// full speed, as in the flow model: it holds no link.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/engine/rated_activities.h"
#include "sim/graph/task_graph.h"
#include "sim/net/collective_model.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

class AlphaBetaNetwork final : public CollectiveModel {
 public:
  // The graph and cluster must outlive the model. Throws InputError if the graph's world does not
  // fit on the cluster.
  AlphaBetaNetwork(const TaskGraph& graph, const ClusterSpec& cluster);

  std::string_view name() const override { return "alpha-beta"; }
  void start(TaskIndex task, TimeNs now, const Concurrency& concurrency) override;
  void on_concurrency_change(std::span<const int> ranks, TimeNs now,
                             const Concurrency& concurrency) override;
  TimeNs next_completion() const override { return activities_.next_completion(); }
  void advance_to(TimeNs now, std::vector<TaskIndex>& finished) override;

  // For all-to-all, the max is taken over the group's members the graph simulates (all members
  // when it simulates none of them). Results are cached by (op, group, bytes, traffic).
  TimeNs isolated_duration(const CollectiveWork& work, const std::vector<int>& group) const override;

 private:
  // Each returns the duration and sets `latency` to NCCL's latency within it.
  double all_to_all_ns(const CollectiveWork& work, const std::vector<int>& group, double& latency) const;
  double tuned_ns(CollectiveOp op, std::int64_t bytes, const std::vector<int>& group, double& latency) const;
  // {isolated duration, NCCL's latency within it}, cached.
  std::pair<TimeNs, TimeNs> cost(const CollectiveWork& work, const std::vector<int>& group) const;
  // `launches` kernel launches one after another, and `bytes` in all copied through HBM.
  double device_copy_ns(double launches, double bytes) const;
  double factor(TaskIndex task, const Concurrency& concurrency) const;
  // Recomputes the rate of every running collective (a loopback node: they all share one GPU).
  void rerate_all(TimeNs now, const Concurrency& concurrency);

  const TaskGraph& graph_;
  const ClusterSpec& cluster_;
  RatedActivities activities_;
  std::map<TaskIndex, std::vector<int>> ranks_;  // simulated ranks of each running collective
  // By (op, group, bytes per peer, traffic matrix, transposed); the key holds the matrix, so its
  // address cannot be reused by another while the entry exists.
  mutable std::map<std::tuple<int, std::vector<int>, std::int64_t, std::shared_ptr<const TrafficMatrix>, bool>,
                   std::pair<TimeNs, TimeNs>>
      cache_;
};

}  // namespace moesim
