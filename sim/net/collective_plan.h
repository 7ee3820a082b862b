// Collectives decomposed into flows over a ClusterTopology (design.md section 4, docs/network.md).
//
// A plan is a sequence of phases; a phase is an optional fixed step (memory-bound stride copies, a
// device copy, NCCL's latency) followed by a set of flows that start together; the phase ends when
// its last flow has drained. A phase may repeat (the steps of a ring). Latencies are NCCL's
// (nccl_model.h) and are paid in the fixed step: the flows only move bytes.
//   all-to-all, pairwise: NCCL's all-to-all latency (its base, then one route latency per round of
//     peers), then every member sends bytes_per_peer to every other member at once (NCCL issues
//     all sends and receives of ncclAllToAll in one group); the part a rank keeps is a local copy
//     hidden behind the transfers. A group of one is a device copy: launch + 2b / HBM bw.
//   all-to-all, 2DH (Tutel): stride copy and the latency of an all-to-all within a node; intra-node
//     all-to-all of b x nodes per peer; stride copy and the latency of one across nodes;
//     inter-node all-to-all among same-local-rank GPUs of b x gpus_per_node per peer. A stride
//     copy reads and writes the rank's p x b bytes: launch + 2pb / (HBM bw x efficiency).
//   all-to-allv: as pairwise, with a traffic matrix of bytes per (source, destination) pair; a
//     round pays only for the pairs that move bytes.
//   all-reduce, all-gather, reduce-scatter: the algorithm and protocol NCCL chooses
//     (tuned_plan.h): NCCL's latency, then rings or trees of flows carrying bytes / efficiency; a
//     latency-bound ring's steps as one coflow.
//
// Aggregation (uniform all-to-all patterns): flows are N^2. When the group is symmetric -- the
// same local ranks on every node it touches (whole nodes, or a tensor x expert layout's strided
// expert group: local rank 0 of every node, or local ranks 0, 2, 4, 6), and every leaf group that
// holds members holds the same number of them and of nodes -- every flow of one class (local
// source rank i, local destination rank j, and whether the peer is in the same node, the same
// leaf group or another one) gets the same max-min rate, because a topology automorphism
// permuting the nodes maps any two of them onto each other. The class is then one weighted flow:
// on each link it puts (number of the class's flows crossing that link) x its rate. This is exact
// (tests compare it with the per-pair plan) and turns N^2 flows into at most 3 x gpus_per_node^2
// weighted flows. Without symmetry the plan falls back to one flow per pair.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/graph/task.h"
#include "sim/net/max_min.h"
#include "sim/net/topology.h"
#include "sim/spec/types.h"

namespace moesim {

struct FlowSpec {
  std::vector<WeightedLink> links;
  double bytes = 0;
};

struct PlanPhase {
  TimeNs local_ns = 0;  // fixed step before the flows: copies, NCCL's latency
  std::vector<FlowSpec> flows;
  int repeat = 1;
};

struct CollectivePlan {
  std::vector<PlanPhase> phases;
};

struct PlanOptions {
  AllToAllAlgorithm all_to_all = AllToAllAlgorithm::kPairwise;
  // Symmetric all-to-all classes as weighted flows, an all-to-allv as one coflow, latency-bound
  // rings' steps as one coflow; false: one flow per pair (per hop and step for rings).
  bool aggregate = true;
};

// Whether uniform patterns over `group` may be aggregated (see above).
bool is_symmetric_group(const ClusterTopology& topo, const std::vector<int>& group);

// One flow of `bytes` over the route from GPU a to GPU b.
FlowSpec pair_flow(const ClusterTopology& topo, int a, int b, double bytes);

// `topo` is built from `cluster`, whose GPU (device copies), links and `nccl` section the plan
// uses. Throws InputError for a group member outside the cluster, or 2DH over a group of partial
// nodes.
CollectivePlan plan_collective(const ClusterTopology& topo, const ClusterSpec& cluster, const CollectiveWork& work,
                               const std::vector<int>& group, const PlanOptions& options);

// All-to-allv: bytes(s, d) is what group[s] sends to group[d] (group positions; the diagonal is a
// local copy, hidden behind the transfers, except in a group of one, where it is the whole
// exchange). Per pair (coflow = false): one flow per pair with bytes, max-min fair among all
// flows -- N^2 flows, each ending at its own time. Coflow: the exchange is one flow over every link
// it uses, weighted by the share of its bytes that link carries, so it moves all pairs at rates
// proportional to their sizes: alone it takes max over links of (bytes on the link / capacity)
// (the fastest any schedule over these routes can do; max-min per pair can be slower, when an
// early finisher leaves a bottleneck's other flows behind), it pays NCCL's all-to-all latency, and
// it shares links max-min with other collectives as one flow. Uniform traffic gives the
// same time both ways (tests). Building it costs O(p^2) additions (the routes' shared pieces are
// summed per member, not listed per pair); running it is
// one flow, which is what makes an every-rank simulation of 1,024 GPUs with skewed routing cheap.
// bytes_by_column: bytes(s, d) reads a matrix stored by destination (a transposed all-to-allv), so
// the coflow walks it in that order; the plan is the same either way.
CollectivePlan plan_all_to_allv(const ClusterTopology& topo, const ClusterSpec& cluster, const std::vector<int>& group,
                                const std::function<std::int64_t(int, int)>& bytes, bool coflow,
                                bool bytes_by_column = false);

// Per-pair form from a matrix: bytes[s][d] (tests and small exchanges).
CollectivePlan plan_all_to_allv(const ClusterTopology& topo, const ClusterSpec& cluster, const std::vector<int>& group,
                                const std::vector<std::vector<std::int64_t>>& bytes);

}  // namespace moesim
