#include "sim/net/tuned_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include "sim/core/checked_math.h"
#include "sim/net/nccl_model.h"

namespace moesim {
namespace {

// The members of `group` per node, nodes in ascending order, members in group order.
std::vector<std::vector<int>> members_by_node(const std::vector<int>& group, int gpus_per_node) {
  std::map<int, std::vector<int>> by_node;
  for (int r : group) by_node[r / gpus_per_node].push_back(r);
  std::vector<std::vector<int>> out;
  for (auto& [node, members] : by_node) out.push_back(std::move(members));
  return out;
}

// A node's members from its k-th on, wrapping round: where channel k enters it.
std::vector<int> rotated(const std::vector<int>& members, int k) {
  std::vector<int> out(members);
  std::rotate(out.begin(), out.begin() + k % static_cast<int>(members.size()), out.end());
  return out;
}

// The rings of a ring phase: within one node one ring in group order (the channels share its
// links); across nodes c rings, ring k visiting each node's members from its k-th on.
std::vector<std::vector<int>> rings_of(const std::vector<int>& group, const std::vector<std::vector<int>>& nodes,
                                       int channels) {
  if (nodes.size() == 1) return {group};
  std::vector<std::vector<int>> rings;
  for (int c = 0; c < channels; ++c) {
    std::vector<int> ring;
    for (const std::vector<int>& members : nodes) {
      const std::vector<int> part = rotated(members, c);
      ring.insert(ring.end(), part.begin(), part.end());
    }
    rings.push_back(std::move(ring));
  }
  return rings;
}

// One step of the rings: every member sends `bytes` to the next, one flow per hop.
void ring_step_flows(const ClusterTopology& topo, const std::vector<std::vector<int>>& rings, double bytes,
                     std::vector<FlowSpec>& out) {
  for (const std::vector<int>& ring : rings)
    for (std::size_t k = 0; k < ring.size(); ++k)
      out.push_back(pair_flow(topo, ring[k], ring[(k + 1) % ring.size()], bytes));
}

// Every step of the rings as one coflow of `bytes` (the steps' bytes of one hop): on each link, the
// number of the rings' hops routed across it, so every hop moves at the coflow's rate.
FlowSpec ring_coflow(const ClusterTopology& topo, const std::vector<std::vector<int>>& rings, double bytes) {
  std::vector<LinkId> hops;  // every hop's route, one after the other
  for (const std::vector<int>& ring : rings)
    for (std::size_t k = 0; k < ring.size(); ++k) topo.route(ring[k], ring[(k + 1) % ring.size()], hops);
  std::sort(hops.begin(), hops.end());
  FlowSpec f;
  f.bytes = bytes;
  for (std::size_t k = 0; k < hops.size();) {
    std::size_t end = k;
    while (end < hops.size() && hops[end] == hops[k]) ++end;
    f.links.push_back({hops[k], static_cast<double>(end - k)});
    k = end;
  }
  return f;
}

// How long one step's bytes take with the rings alone: `hop_bytes` at the fair share of the most
// crowded link (its capacity over the hops routed across it).
double step_alone_ns(const ClusterTopology& topo, const FlowSpec& coflow, double hop_bytes) {
  double rate = kUnlimitedRate;
  for (const WeightedLink& l : coflow.links) rate = std::min(rate, topo.link(l.link).capacity / l.weight);
  return hop_bytes / rate;
}

// Flows both ways between a and b, `bytes` each.
void both_ways(const ClusterTopology& topo, int a, int b, double bytes, std::vector<FlowSpec>& out) {
  out.push_back(pair_flow(topo, a, b, bytes));
  out.push_back(pair_flow(topo, b, a, bytes));
}

void tree_flows(const ClusterTopology& topo, const std::vector<std::vector<int>>& nodes, int channels, double bytes,
                std::vector<FlowSpec>& out) {
  const int n = static_cast<int>(nodes.size());
  // Node positions in the second tree: shifted by one for an even count, mirrored for an odd one.
  const auto second = [n](int pos) { return n % 2 == 0 ? (pos + n - 1) % n : n - 1 - pos; };
  for (int c = 0; c < channels; ++c) {
    std::vector<int> heads;
    for (const std::vector<int>& members : nodes) {
      const std::vector<int> chain = rotated(members, c);
      heads.push_back(chain.front());
      for (std::size_t k = 0; k + 1 < chain.size(); ++k) both_ways(topo, chain[k], chain[k + 1], bytes / channels, out);
    }
    for (int r = 1; r < n; ++r) {
      const int parent = nccl_tree_parent(r, n);
      both_ways(topo, heads[static_cast<std::size_t>(r)], heads[static_cast<std::size_t>(parent)], bytes / 2 / channels,
                out);
      both_ways(topo, heads[static_cast<std::size_t>(second(r))], heads[static_cast<std::size_t>(second(parent))],
                bytes / 2 / channels, out);
    }
  }
}

}  // namespace

int nccl_tree_parent(int r, int n) {
  if (r == 0) return -1;
  const int bit = r & -r;
  const int up = (r & ~bit) | (bit << 1);
  return up < n ? up : r & ~bit;
}

void add_tuned_phases(const ClusterTopology& topo, const ClusterSpec& cluster, const CollectiveWork& work,
                      const std::vector<int>& group, bool aggregate, CollectivePlan& plan) {
  const auto p = static_cast<int>(group.size());
  const double total = static_cast<double>(checked_mul(work.bytes_per_peer, static_cast<std::int64_t>(p)));
  if (p <= 1 || total <= 0) return;
  const NcclRun run = nccl_choice(cluster, work.op, work.bytes_per_peer, group);
  plan.phases.push_back(PlanPhase{static_cast<TimeNs>(std::llround(run.latency_ns)), {}, 1});
  const std::vector<std::vector<int>> nodes = members_by_node(group, topo.gpus_per_node());
  PlanPhase phase;
  if (run.algorithm == NcclAlgorithm::kRing) {
    const std::vector<std::vector<int>> rings = rings_of(group, nodes, run.channels);
    const double hop_bytes =
        static_cast<double>(work.bytes_per_peer) / run.efficiency / static_cast<double>(rings.size());
    const int steps = work.op == CollectiveOp::kAllReduce ? 2 * (p - 1) : p - 1;
    FlowSpec coflow = ring_coflow(topo, rings, steps * hop_bytes);
    if (aggregate && steps * step_alone_ns(topo, coflow, hop_bytes) <= run.latency_ns) {
      phase.flows.push_back(std::move(coflow));
    } else {
      ring_step_flows(topo, rings, hop_bytes, phase.flows);
      phase.repeat = steps;
    }
  } else {
    tree_flows(topo, nodes, run.channels, total / run.efficiency, phase.flows);
  }
  plan.phases.push_back(std::move(phase));
}

}  // namespace moesim
