#include "sim/net/nccl_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "sim/core/checked_math.h"
#include "sim/core/error.h"
#include "sim/net/nccl_channels.h"

namespace moesim {
namespace {

bool is_all_reduce(CollectiveOp op) { return op == CollectiveOp::kAllReduce; }

int ring_steps(CollectiveOp op, int p) { return is_all_reduce(op) ? 2 * (p - 1) : p - 1; }

// The ring's steps that cross the network, as NCCL 2.19 counts them: 2N for an all-reduce over
// N > 1 nodes (its reduce-scatter and all-gather passes each cross the ring's N node boundaries),
// N - 1 for all-gather and reduce-scatter.
int ring_inter_steps(CollectiveOp op, int nodes) {
  if (is_all_reduce(op)) return nodes > 1 ? 2 * nodes : 0;
  return nodes - 1;
}

// NCCL's static correction of the tree's bandwidth for medium sizes, by protocol (LL, LL128,
// Simple) and log2(bytes / 64), 64 B to 256 MiB; 1 above. NCCL applies it to its estimate when it
// chooses, not to the collective itself (treeCorrectionFactor in src/graph/tuning.cc, NCCL 2.19).
constexpr double kTreeCorrection[kNumNcclProtocols][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

double tree_correction(NcclProtocol q, double bytes) {
  const int k = bytes < 128 ? 0 : static_cast<int>(std::floor(std::log2(bytes / 64)));
  return k < 23 ? kTreeCorrection[static_cast<std::size_t>(q)][static_cast<std::size_t>(k)] : 1.0;
}

int floor_log2(int n) {
  int l = 0;
  while (n > 1) {
    n /= 2;
    ++l;
  }
  return l;
}

// Rings (trees) side by side: across nodes, each leaves through another GPU's NIC; inside one node
// they all share the same links, so one stands for them.
int channels_of(const NcclTuning& t, const NcclGroup& g) { return g.nodes > 1 ? std::min(t.channels, g.per_node) : 1; }

// The busiest GPU's sends in c chains rotated over m members, in units of a chain's share: an
// inner GPU sends its share up and down (2), the head down only and the tail up only (1 each).
double chain_units(int m, int c) {
  if (m < 2) return 0;
  double most = 0;
  for (int x = 0; x < m; ++x) {
    double units = 0;
    for (int k = 0; k < c; ++k) {
      const int pos = ((x - k) % m + m) % m;
      units += pos == 0 || pos == m - 1 ? 1 : 2;
    }
    most = std::max(most, units / c);
  }
  return most;
}

// Time to move the bytes of algorithm `a` at full efficiency (see the header).
double transfer_ns(CollectiveOp op, NcclAlgorithm a, double bytes, const NcclGroup& g, const NcclLinks& links, int c) {
  const double nics = c * links.inter;
  if (a == NcclAlgorithm::kRing) {
    const double traffic = static_cast<double>(ring_steps(op, g.ranks)) / g.ranks * bytes;
    if (g.nodes == 1) return traffic / links.intra;
    const int m = g.most();
    // Each member leaves its node in one ring when there is a ring per member; its other rings
    // stay on NVLink.
    const double intra_share = c == m ? (m - 1.0) / m : 1.0;
    return std::max(m > 1 ? intra_share * traffic / links.intra : 0.0, traffic / nics);
  }
  const double chain = chain_units(g.most(), c) * bytes;
  double t = chain > 0 ? chain / links.intra : 0;
  if (g.nodes > 1) t = std::max(t, (g.nodes == 2 ? 1.0 : 2.0) * bytes / nics);
  return t;
}

// NCCL's threads per channel for (a, q) (sim/net/nccl_channels.h).
int max_threads(NcclAlgorithm a, NcclProtocol q, const NcclGroup& g, const NcclLinks& links) {
  if (a == NcclAlgorithm::kRing && q == NcclProtocol::kSimple) {
    const double ring = g.most() > 1 ? links.intra : links.inter;
    if (ring <= kNcclPciBytesPerNs) return kNcclSlowRingSimpleThreads;
  }
  return kNcclMaxThreads[static_cast<std::size_t>(q)];
}

}  // namespace

int nccl_channels_used(const NcclTuning& t, NcclAlgorithm a, NcclProtocol q, double bytes, const NcclGroup& g,
                       const NcclLinks& links) {
  const double threads = max_threads(a, q, g, links);
  double threshold = kNcclBytesPerThread[static_cast<std::size_t>(q)];
  if (a == NcclAlgorithm::kRing && q == NcclProtocol::kLL) threshold *= g.ranks;
  int nc = t.channels;
  while (nc >= 2 && bytes < nc * threads * threshold) --nc;
  return nc;
}

NcclGroup nccl_group(const std::vector<int>& group, int gpus_per_node) {
  std::map<int, int> members;
  for (int r : group) ++members[r / gpus_per_node];
  NcclGroup g;
  g.ranks = static_cast<int>(group.size());
  g.nodes = static_cast<int>(members.size());
  g.per_node = std::numeric_limits<int>::max();
  for (const auto& [node, count] : members) {
    g.per_node = std::min(g.per_node, count);
    g.max_per_node = std::max(g.max_per_node, count);
  }
  if (members.empty()) g.per_node = 0;
  return g;
}

NcclLinks nccl_links(const ClusterSpec& cluster, const NcclGroup& g) {
  NcclLinks l;
  l.intra = cluster.node.intra_node.effective_bandwidth() / kNsPerS;
  l.inter = cluster.inter_node.effective_bandwidth() / kNsPerS;
  l.inter_latency = cluster.inter_node.latency_ns;
  if (g.ranks > g.nodes && !(l.intra > 0))
    throw InputError(cluster.origin, "cluster " + cluster.name + " has no intra-node bandwidth, needed by a collective");
  if (g.nodes > 1 && !(l.inter > 0))
    throw InputError(cluster.origin, "cluster " + cluster.name + " has no inter-node bandwidth, needed by a collective");
  return l;
}

double nccl_latency_ns(const NcclTuning& t, CollectiveOp op, NcclAlgorithm a, NcclProtocol q, const NcclGroup& g,
                       TimeNs inter_latency) {
  const auto intra = static_cast<double>(t.hop(t.intra_hop, a, q));
  // NCCL adds the network's own latency to each network hop, and once more for Simple (its flush).
  const double net = static_cast<double>(t.hop(NcclHop::kNet, a, q)) +
                     static_cast<double>(inter_latency) * (q == NcclProtocol::kSimple ? 2 : 1);
  const auto base = static_cast<double>(t.base(a, q));
  if (a == NcclAlgorithm::kRing) {
    const int steps = ring_steps(op, g.ranks);
    const int inter = std::min(steps, ring_inter_steps(op, g.nodes));
    return base + (steps - inter) * intra + inter * net;
  }
  return base + 2 * ((g.per_node - 1) * intra + floor_log2(g.nodes) * net);
}

NcclRun choose_nccl(const NcclTuning& t, CollectiveOp op, double bytes, const NcclGroup& g, const NcclLinks& links) {
  MOESIM_CHECK(op != CollectiveOp::kAllToAll, "all-to-all is not one of NCCL's tuned collectives");
  NcclRun best;
  double best_estimate = std::numeric_limits<double>::infinity();
  const int c = channels_of(t, g);
  for (NcclAlgorithm a : {NcclAlgorithm::kRing, NcclAlgorithm::kTree}) {
    if (a == NcclAlgorithm::kTree && !is_all_reduce(op)) continue;
    for (NcclProtocol q : {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple}) {
      if (!t.enabled(a, q)) continue;
      NcclRun r{a, q, nccl_latency_ns(t, op, a, q, g, links.inter_latency), t.efficiency_of(a, q), c, 0};
      const double transfer = transfer_ns(op, a, bytes, g, links, c);
      r.time_ns = r.latency_ns + transfer / r.efficiency;
      const double correction = a == NcclAlgorithm::kTree ? tree_correction(q, bytes) : 1.0;
      const double estimate = r.latency_ns + transfer / (r.efficiency * correction);
      // Ties go to the first: ring before tree, LL before LL128 before Simple, as NCCL scans them.
      if (estimate < best_estimate) {
        best = r;
        best_estimate = estimate;
      }
    }
  }
  if (!std::isfinite(best_estimate))
    throw InputError(std::string("the nccl section enables no algorithm and protocol a ") + std::string(to_string(op)) +
                     " can use (all-gather and reduce-scatter run on rings only)");
  if (g.ranks <= 1 || bytes <= 0) {
    best.time_ns = best.latency_ns = 0;
    return best;
  }
  // NCCL chooses as if every channel ran, then runs the size on the channels it fills, at that
  // share of the bandwidth (sim/net/nccl_channels.h).
  best.efficiency *= static_cast<double>(nccl_channels_used(t, best.algorithm, best.protocol, bytes, g, links)) /
                     t.channels;
  best.time_ns = best.latency_ns + transfer_ns(op, best.algorithm, bytes, g, links, c) / best.efficiency;
  return best;
}

NcclRun nccl_choice(const ClusterSpec& cluster, CollectiveOp op, std::int64_t bytes_per_peer,
                    const std::vector<int>& group) {
  const double total = static_cast<double>(checked_mul(bytes_per_peer, static_cast<std::int64_t>(group.size())));
  const NcclGroup shape = nccl_group(group, cluster.node.gpus_per_node);
  return choose_nccl(cluster.node.nccl, op, total, shape, nccl_links(cluster, shape));
}

double all_to_all_latency_ns(const NcclTuning& t, int p, const std::function<TimeNs(int, int)>& pair_latency,
                             TimeNs ceiling) {
  double total = static_cast<double>(t.base(NcclAlgorithm::kRing, NcclProtocol::kSimple));
  for (int d = 1; d < p; ++d) {
    TimeNs round = 0;
    for (int s = 0; s < p && round < ceiling; ++s) round = std::max(round, pair_latency(s, (s + d) % p));
    total += static_cast<double>(round);
  }
  return total;
}

}  // namespace moesim
