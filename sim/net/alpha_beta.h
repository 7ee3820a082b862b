// AlphaBetaNetwork: the alpha-beta (latency + bytes / bandwidth) collective model.
//
// Ranks are placed node-major (node = rank / gpus_per_node). b = bytes_per_peer, p = group size,
// link bandwidths are effective (line rate x efficiency), latencies per message.
//   all-to-all, per simulated member r (the collective takes the max over members):
//     t_intra = intra_latency + intra_peers(r) * b / intra_bw     (0 without intra-node peers)
//     t_inter = inter_latency + inter_peers(r) * b / inter_bw     (0 without inter-node peers)
//     t(r)    = max(t_intra, t_inter)   (NVLink and the NIC work concurrently; the part a rank
//               sends itself is a local copy, hidden behind these)
//     p = 1:  a device-to-device copy, launch + 2b / (hbm_bandwidth * hbm_efficiency)
//   loopback node (virtual ranks on one GPU, the runtime's loopback transport): every block, own
//     included, is a device copy on the receiver's stream; receivers copy in parallel, p copies each:
//       all-to-all(v):  max(c * launch, p * launch + 2 * (sum of all pair bytes) / (hbm_bandwidth *
//                       hbm_efficiency)), c = the non-empty blocks (p^2 for all-to-all), all issued by
//                       one host thread
//       ring:           steps * launch + 2 * steps * S / (hbm_bandwidth * hbm_efficiency)
//     and the collectives running at once share the GPU's memory: each progresses at 1/k.
//   all-to-allv (a traffic matrix): the same per member r, with peers * b replaced by the larger
//     of the bytes r sends and receives over the link class (links are full duplex), and a class's
//     latency paid only when r has traffic there.
//   all-reduce (ring), S = b * p:  2(p-1) * latency + 2(p-1)/p * S / bw
//   all-gather, reduce-scatter (ring):  (p-1) * latency + (p-1)/p * S / bw
//   bw and latency are the inter-node link's when the group spans more than one node, else the
//   intra-node link's (a ring is as fast as its slowest hop).
// While it runs, a collective progresses at the minimum interference factor over its simulated
// ranks (MPipeMoE Fig. 3, see sim/cost/interference.h).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string_view>
#include <tuple>
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
  double all_to_all_ns(const CollectiveWork& work, const std::vector<int>& group) const;
  double ring_ns(CollectiveOp op, std::int64_t bytes, const std::vector<int>& group) const;
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
  mutable std::map<std::tuple<int, std::vector<int>, std::int64_t, std::shared_ptr<const TrafficMatrix>, bool>, TimeNs>
      cache_;
};

}  // namespace moesim
