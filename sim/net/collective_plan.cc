#include "sim/net/collective_plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "sim/core/error.h"
#include "sim/net/nccl_model.h"
#include "sim/net/tuned_plan.h"

namespace moesim {
namespace {

enum class Pattern { kAllPairs, kIntraNode, kSameLocalInterNode };

bool in_pattern(Pattern p, bool same_node, int i, int j) {
  switch (p) {
    case Pattern::kAllPairs: return true;
    case Pattern::kIntraNode: return same_node;
    case Pattern::kSameLocalInterNode: return !same_node && i == j;
  }
  return false;
}

// The bytes an all-to-allv puts on every link (its pairs' routes summed) and their total. Routes
// are not listed pair by pair: a pair within a node adds to its local route, while a pair across
// nodes only adds to its source's way out (the GPU's path to its NIC, the NIC port, the leaf
// uplink when the leaves differ) and to its destination's way in, so those are summed per member
// first and spread once: O(p^2) additions instead of p^2 routes. The sums are integers, so the
// loads equal a route-by-route sum exactly.
struct CoflowLoad {
  std::vector<std::int64_t> load;  // per link
  std::int64_t total = 0;
};

CoflowLoad coflow_load(const ClusterTopology& topo, const std::vector<int>& group,
                       const std::function<std::int64_t(int, int)>& bytes, bool by_column) {
  const std::size_t p = group.size();
  const int g = topo.gpus_per_node();
  CoflowLoad c;
  c.load.assign(topo.num_links(), 0);
  std::vector<std::int64_t> out(p, 0), in(p, 0), out_cross(p, 0), in_cross(p, 0);
  std::vector<int> leaf(p, 0);  // of the member's NIC; only read for pairs across nodes
  if (topo.num_nodes() > 1) {
    for (std::size_t m = 0; m < p; ++m) leaf[m] = topo.leaf_of(group[m] / g, topo.nic_of(group[m] % g));
  }
  // The pairs in the order the matrix is stored (sums of integers do not depend on it).
  for (std::size_t x = 0; x < p * p; ++x) {
    const std::size_t s = by_column ? x % p : x / p, d = by_column ? x / p : x % p;
    const std::int64_t b = s == d ? 0 : bytes(static_cast<int>(s), static_cast<int>(d));
    if (b <= 0) continue;
    c.total += b;
    const int na = group[s] / g, i = group[s] % g, nb = group[d] / g, j = group[d] % g;
    if (na == nb) {
      for (int slot : topo.local_route(i, j)) c.load[static_cast<std::size_t>(topo.local_link(na, slot))] += b;
      continue;
    }
    out[s] += b;
    in[d] += b;
    if (leaf[s] != leaf[d]) {
      out_cross[s] += b;
      in_cross[d] += b;
    }
  }
  const auto add = [&](LinkId l, std::int64_t b) { c.load[static_cast<std::size_t>(l)] += b; };
  for (std::size_t m = 0; m < p; ++m) {
    const int node = group[m] / g, i = group[m] % g;
    if (out[m] > 0) {
      for (int slot : topo.to_nic(i)) add(topo.local_link(node, slot), out[m]);
      add(topo.nic_out(node, topo.nic_of(i)), out[m]);
      if (out_cross[m] > 0) add(topo.leaf_up(leaf[m]), out_cross[m]);
    }
    if (in[m] > 0) {
      add(topo.nic_in(node, topo.nic_of(i)), in[m]);
      for (int slot : topo.from_nic(i)) add(topo.local_link(node, slot), in[m]);
      if (in_cross[m] > 0) add(topo.leaf_down(leaf[m]), in_cross[m]);
    }
  }
  return c;
}

// Per-link weights of one aggregated flow, summed in a dense array over the cluster's links: a
// class touches about a thousand links on 1,024 GPUs, and a tree map per class cost more than the
// max-min solve. Each link's additions happen in the same order as before, and take() emits the
// links in ascending id, so the flows are bit-for-bit those of the map.
class LinkWeights {
 public:
  explicit LinkWeights(std::size_t num_links) : weight_(num_links, 0.0), seen_(num_links, 0) {}
  double& operator[](LinkId l) {
    const auto i = static_cast<std::size_t>(l);
    if (!seen_[i]) {
      seen_[i] = 1;
      used_.push_back(l);
    }
    return weight_[i];
  }
  // The flow over the links added since the last take(); resets them.
  FlowSpec take(double bytes) {
    std::sort(used_.begin(), used_.end());
    FlowSpec f;
    f.bytes = bytes;
    f.links.reserve(used_.size());
    for (LinkId l : used_) {
      const auto i = static_cast<std::size_t>(l);
      f.links.push_back({l, weight_[i]});
      weight_[i] = 0.0;
      seen_[i] = 0;
    }
    used_.clear();
    return f;
  }

 private:
  std::vector<double> weight_;
  std::vector<char> seen_;
  std::vector<LinkId> used_;
};

std::vector<int> member_nodes(const ClusterTopology& topo, const std::vector<int>& group) {
  std::vector<int> nodes;
  for (int r : group) {
    const int n = r / topo.gpus_per_node();
    if (nodes.empty() || nodes.back() != n) nodes.push_back(n);
  }
  return nodes;
}

// The local ranks a group holds on each of its nodes when they are the same on every node (whole
// nodes, or the strided groups of tensor x expert layouts: local ranks {0, 2, 4, 6} of each node);
// empty otherwise.
std::vector<int> uniform_local_ranks(const ClusterTopology& topo, const std::vector<int>& group) {
  const int g = topo.gpus_per_node();
  std::vector<int> first;
  for (int r : group) {
    if (r / g != group.front() / g) break;
    first.push_back(r % g);
  }
  const std::size_t per_node = first.size();
  if (group.size() % per_node != 0) return {};
  for (std::size_t k = 0; k < group.size(); ++k) {
    const int node = group[k - k % per_node] / g;
    if (group[k] / g != node || group[k] % g != first[k % per_node]) return {};
    if (k % per_node == 0 && k > 0 && node == group[k - 1] / g) return {};
  }
  return first;
}

bool whole_nodes(const ClusterTopology& topo, const std::vector<int>& group) {
  const int g = topo.gpus_per_node();
  if (group.size() % static_cast<std::size_t>(g) != 0) return false;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const int expected = group[k - k % static_cast<std::size_t>(g)] + static_cast<int>(k % static_cast<std::size_t>(g));
    if (group[k] != expected || group[k - k % static_cast<std::size_t>(g)] % g != 0) return false;
  }
  return true;
}

// Flows of a uniform pattern: every ordered pair (a, b), a != b, of `group` allowed by `pattern`
// sends `bytes`; aggregated by class (local ranks i, j of the group's per-node set) when the group
// is symmetric.
void uniform_flows(const ClusterTopology& topo, const std::vector<int>& group, Pattern pattern,
                   double bytes, bool aggregate, std::vector<FlowSpec>& out) {
  const int gpn = topo.gpus_per_node();
  if (!aggregate || !is_symmetric_group(topo, group)) {
    for (int a : group)
      for (int b : group) {
        if (a == b) continue;
        if (in_pattern(pattern, a / gpn == b / gpn, a % gpn, b % gpn)) out.push_back(pair_flow(topo, a, b, bytes));
      }
    return;
  }
  const std::vector<int> nodes = member_nodes(topo, group);
  const int per_group = static_cast<int>(std::count_if(nodes.begin(), nodes.end(), [&](int n) {
    return n / topo.nodes_per_leaf() == nodes.front() / topo.nodes_per_leaf();
  }));
  const int same_count = per_group - 1;
  const int cross_count = static_cast<int>(nodes.size()) - per_group;
  const std::vector<int> local = uniform_local_ranks(topo, group);
  LinkWeights w(topo.num_links());
  for (int i : local) {
    for (int j : local) {
      if (i != j && in_pattern(pattern, true, i, j)) {
        for (int n : nodes)
          for (int s : topo.local_route(i, j)) w[topo.local_link(n, s)] += 1.0;
        out.push_back(w.take(bytes));
      }
      if (!in_pattern(pattern, false, i, j)) continue;
      const int ki = topo.nic_of(i), kj = topo.nic_of(j);
      for (const bool cross : {false, true}) {
        const double cnt = cross ? cross_count : same_count;
        if (cnt <= 0) continue;
        for (int n : nodes) {
          for (int s : topo.to_nic(i)) w[topo.local_link(n, s)] += cnt;
          w[topo.nic_out(n, ki)] += cnt;
          w[topo.nic_in(n, kj)] += cnt;
          for (int s : topo.from_nic(j)) w[topo.local_link(n, s)] += cnt;
          // Same group: through the spine only between different leaves (rails).
          if (cross || topo.leaf_of(n, ki) != topo.leaf_of(n, kj)) {
            w[topo.leaf_up(topo.leaf_of(n, ki))] += cnt;
            w[topo.leaf_down(topo.leaf_of(n, kj))] += cnt;
          }
        }
        out.push_back(w.take(bytes));
      }
    }
  }
}

void check_group(const ClusterTopology& topo, const std::vector<int>& group) {
  MOESIM_CHECK(!group.empty(), "collective over an empty group");
  for (int r : group) {
    if (r < 0 || r >= topo.num_gpus())
      throw InputError("group member " + std::to_string(r) + " is outside the cluster (" +
                       std::to_string(topo.num_gpus()) + " GPUs)");
  }
}

TimeNs copy_ns(const GpuSpec& gpu, double bytes) {
  const double hbm = gpu.hbm_bandwidth * gpu.hbm_efficiency / kNsPerS;
  if (!(hbm > 0)) throw InputError(gpu.origin, "GPU " + gpu.name + " needs a positive hbm_bandwidth");
  return gpu.kernel_launch_ns + static_cast<TimeNs>(std::llround(2.0 * bytes / hbm));
}

// The largest latency any pair of GPUs has: a round of an all-to-all that reaches it cannot pay more.
TimeNs latency_ceiling(const ClusterTopology& topo) {
  TimeNs c = 0;
  for (int i = 0; i < topo.gpus_per_node(); ++i)
    for (int j = 0; j < topo.gpus_per_node(); ++j) {
      if (i != j) c = std::max(c, topo.local_latency(i, j));
      if (topo.num_nodes() > 1) c = std::max(c, topo.inter_latency(i, j));
    }
  return c;
}

// NCCL's latency of an all-to-all over `members` (nccl_model.h): its pairs pay their routes'
// latency, a pair without bytes none.
TimeNs all_to_all_latency(const ClusterTopology& topo, const NcclTuning& tuning, const std::vector<int>& members,
                          const std::function<bool(int, int)>& moves) {
  const auto lat = [&](int s, int d) {
    return moves(s, d) ? topo.route_latency(members[static_cast<std::size_t>(s)], members[static_cast<std::size_t>(d)])
                       : TimeNs{0};
  };
  return static_cast<TimeNs>(std::llround(
      all_to_all_latency_ns(tuning, static_cast<int>(members.size()), lat, latency_ceiling(topo))));
}

// The members of `group` on its first node, and its members at the first member's local rank
// (one per node): the two sub-exchanges of a 2DH all-to-all over whole nodes.
std::vector<int> first_node(const ClusterTopology& topo, const std::vector<int>& group) {
  std::vector<int> out;
  for (int r : group)
    if (r / topo.gpus_per_node() == group.front() / topo.gpus_per_node()) out.push_back(r);
  return out;
}

std::vector<int> same_local_rank(const ClusterTopology& topo, const std::vector<int>& group) {
  std::vector<int> out;
  for (int r : group)
    if (r % topo.gpus_per_node() == group.front() % topo.gpus_per_node()) out.push_back(r);
  return out;
}

}  // namespace

FlowSpec pair_flow(const ClusterTopology& topo, int a, int b, double bytes) {
  std::vector<LinkId> route;
  topo.route(a, b, route);
  FlowSpec f;
  f.bytes = bytes;
  for (LinkId l : route) f.links.push_back({l, 1.0});
  return f;
}

bool is_symmetric_group(const ClusterTopology& topo, const std::vector<int>& group) {
  if (uniform_local_ranks(topo, group).empty()) return false;
  const std::vector<int> nodes = member_nodes(topo, group);
  const int npl = topo.nodes_per_leaf();
  std::map<int, int> members;
  for (int n : nodes) ++members[n / npl];
  const int expected = members.begin()->second;
  for (const auto& [g, count] : members) {
    const int total = std::min(npl, topo.num_nodes() - g * npl);
    const int first_total = std::min(npl, topo.num_nodes() - members.begin()->first * npl);
    if (count != expected || total != first_total) return false;
  }
  return true;
}

CollectivePlan plan_collective(const ClusterTopology& topo, const ClusterSpec& cluster, const CollectiveWork& work,
                               const std::vector<int>& group, const PlanOptions& options) {
  check_group(topo, group);
  const GpuSpec& gpu = cluster.node.gpu;
  const auto b = static_cast<double>(work.bytes_per_peer);
  const auto p = static_cast<int>(group.size());
  CollectivePlan plan;
  if (work.op != CollectiveOp::kAllToAll) {
    add_tuned_phases(topo, cluster, work, group, options.aggregate, plan);
    return plan;
  }
  if (p == 1) {
    plan.phases.push_back(PlanPhase{copy_ns(gpu, b), {}, 1});
    return plan;
  }
  if (b <= 0) return plan;  // nothing moves: NCCL issues no transfer
  const auto every_pair = [](int, int) { return true; };
  if (options.all_to_all == AllToAllAlgorithm::kPairwise) {
    PlanPhase phase;
    phase.local_ns = all_to_all_latency(topo, cluster.node.nccl, group, every_pair);
    uniform_flows(topo, group, Pattern::kAllPairs, b, options.aggregate, phase.flows);
    plan.phases.push_back(std::move(phase));
    return plan;
  }
  if (!whole_nodes(topo, group))
    throw InputError("the 2DH all-to-all needs a group of whole nodes (" + std::to_string(topo.gpus_per_node()) +
                     " GPUs each); this group has " + std::to_string(p) + " ranks starting at " +
                     std::to_string(group.front()));
  const auto nodes = static_cast<double>(member_nodes(topo, group).size());
  const TimeNs stride = copy_ns(gpu, b * p);
  // Each of the two all-to-alls is an NCCL exchange of its own, with its own rounds of peers.
  PlanPhase intra;
  intra.local_ns = stride + all_to_all_latency(topo, cluster.node.nccl, first_node(topo, group), every_pair);
  uniform_flows(topo, group, Pattern::kIntraNode, b * nodes, options.aggregate, intra.flows);
  PlanPhase inter;
  inter.local_ns = stride + (nodes > 1 ? all_to_all_latency(topo, cluster.node.nccl, same_local_rank(topo, group),
                                                            every_pair)
                                       : 0);
  uniform_flows(topo, group, Pattern::kSameLocalInterNode, b * topo.gpus_per_node(), options.aggregate, inter.flows);
  plan.phases.push_back(std::move(intra));
  plan.phases.push_back(std::move(inter));
  return plan;
}

CollectivePlan plan_all_to_allv(const ClusterTopology& topo, const ClusterSpec& cluster, const std::vector<int>& group,
                                const std::vector<std::vector<std::int64_t>>& bytes) {
  MOESIM_CHECK(bytes.size() == group.size(), "traffic matrix rows differ from the group size");
  for (const auto& row : bytes) MOESIM_CHECK(row.size() == group.size(), "traffic matrix is not square");
  return plan_all_to_allv(
      topo, cluster, group,
      [&](int s, int d) { return bytes[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)]; }, false);
}

CollectivePlan plan_all_to_allv(const ClusterTopology& topo, const ClusterSpec& cluster, const std::vector<int>& group,
                                const std::function<std::int64_t(int, int)>& bytes, bool coflow, bool bytes_by_column) {
  check_group(topo, group);
  const auto p = static_cast<int>(group.size());
  CollectivePlan plan;
  if (p == 1) {  // the whole exchange is a device copy of what the rank keeps
    plan.phases.push_back(PlanPhase{copy_ns(cluster.node.gpu, static_cast<double>(bytes(0, 0))), {}, 1});
    return plan;
  }
  PlanPhase phase;
  if (!coflow) {
    for (int s = 0; s < p; ++s)
      for (int d = 0; d < p; ++d) {
        const std::int64_t b = s == d ? 0 : bytes(s, d);
        if (b > 0) phase.flows.push_back(pair_flow(topo, group[static_cast<std::size_t>(s)],
                                                   group[static_cast<std::size_t>(d)], static_cast<double>(b)));
      }
  } else {
    // One coflow: the bytes every link carries, summed over the pairs routed across it.
    const CoflowLoad c = coflow_load(topo, group, bytes, bytes_by_column);
    if (c.total > 0) {
      FlowSpec f;
      f.bytes = static_cast<double>(c.total);
      for (std::size_t l = 0; l < c.load.size(); ++l)
        if (c.load[l] > 0)
          f.links.push_back({static_cast<LinkId>(l), static_cast<double>(c.load[l]) / static_cast<double>(c.total)});
      phase.flows.push_back(std::move(f));
    }
  }
  if (phase.flows.empty()) return plan;  // nothing moves: NCCL issues no transfer
  phase.local_ns = all_to_all_latency(topo, cluster.node.nccl, group, [&](int s, int d) { return bytes(s, d) > 0; });
  plan.phases.push_back(std::move(phase));
  return plan;
}

}  // namespace moesim
