// How NCCL runs a collective: its algorithm and protocol, chosen by size, and their cost
// (docs/network.md "Collectives as NCCL runs them"). Both network models use it: the alpha-beta
// model takes the estimate below as the duration, the flow model takes the choice, latency and
// efficiency and moves the bytes as flows over the topology.
//
// For an all-reduce, all-gather or reduce-scatter of S bytes (NCCL's size: the whole buffer, b x p)
// over p ranks on N nodes, m of them on each node, NCCL estimates every enabled pair (algorithm a,
// protocol q) and runs the fastest (src/graph/tuning.cc, the constants in sim/spec/nccl_tuning.h):
//   time = latency(a, q) + traffic(a) / efficiency(a, q)
//   ring:  steps = 2(p-1) (all-reduce) or p-1; inter-node steps = 2N (all-reduce, N > 1) or N-1
//          latency = base + (steps - inter steps) x hop(intra) + inter steps x hop(net)
//          traffic = steps/p x S; across nodes c = min(channels, m) rings side by side each leave
//          a node through another GPU's NIC, so the time is the larger of traffic / (c NICs) and
//          the NVLink share, traffic / intra x (m-1)/m when every member of a node leaves it in
//          one ring (c = m), x 1 otherwise (one node: traffic / intra)
//   tree (all-reduce only; NCCL's double binary tree between nodes, a chain inside each):
//          latency = base + 2 x ((m-1) x hop(intra) + floor(log2 N) x hop(net))
//          traffic = the larger of the chain's share over a GPU's intra-node link and X x S over
//          c NICs. A chain carries the reduction up and the result down: an inner GPU sends 2 x
//          its share, the head and the tail 1 x; with c chains rotated over the m members (one
//          per channel, as the rings), the busiest GPU sends max over members of the sum of
//          those units / c x S (2S for one chain of three or more; 2(m-1)/m S for m chains).
//          X = 1 for two nodes (each node sends its half-tree's share once), 2 for more (an inner
//          node sends to its parent and both children)
//   hop(net) includes the network's own latency (inter_node.latency), twice for Simple.
// The choice uses moesim's link bandwidths (the hardware file's intra_node and inter_node), not
// NCCL's per-channel graph bandwidths, so both models pick the same pair for the same group; like
// NCCL it scales the tree's bandwidth by NCCL's correction factors for medium sizes when choosing
// (only then), and it estimates every pair on all of its channels.
// Channels: NCCL then runs the chosen pair on the channels the size fills, fewer for small sizes
// (sim/net/nccl_channels.h), each moving the link's bandwidth over the tuning's `channels`. The
// time is the chosen pair's estimate without the tree's correction and with the bandwidth scaled
// by channels used / channels; `efficiency` carries that share to the flow model.
// Not modelled: NVLS and CollNet (in-switch reduction), NCCL's per-channel bandwidth caps (LL's,
// LL128's, the tree's), fewer threads per channel for the smallest sizes, the single-node tree's
// LL128 factor (7/9 instead of 120/128), the ring's "plateau" latency across nodes.
//
// All-to-all is per-peer send/recv (NCCL has no tuning entry for it): one kernel launch, NCCL's
// Simple base latency, then p-1 rounds -- in round d every member sends to the member d places
// after it -- each paying the largest latency among its pairs (the hardware file's link latency of
// the pair: intra-node, or inter-node). The bytes move as in the pairwise exchange.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/graph/task.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

// The shape NCCL sees of a rank group.
struct NcclGroup {
  NcclGroup() = default;
  NcclGroup(int ranks_, int nodes_, int per_node_, int max_per_node_ = 0)
      : ranks(ranks_), nodes(nodes_), per_node(per_node_), max_per_node(max_per_node_) {}

  int ranks = 1;
  int nodes = 1;
  int per_node = 1;      // fewest members on one of its nodes
  int max_per_node = 0;  // most members on one of its nodes; 0: per_node
  int most() const { return max_per_node > 0 ? max_per_node : per_node; }
};
NcclGroup nccl_group(const std::vector<int>& group, int gpus_per_node);

// Link bandwidths per GPU and direction (bytes per ns, line rate x efficiency) and the network's
// latency, from the hardware file.
struct NcclLinks {
  double intra = 0;
  double inter = 0;
  TimeNs inter_latency = 0;
};
// Throws InputError when a link the group crosses has no bandwidth.
NcclLinks nccl_links(const ClusterSpec& cluster, const NcclGroup& g);

struct NcclRun {
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  double latency_ns = 0;
  double efficiency = 1;  // the protocol's, times the share of NCCL's channels the size runs on
  int channels = 1;  // rings (trees) side by side, each leaving a node through its own NIC
  double time_ns = 0;  // latency + traffic / efficiency
};

// NCCL's latency of (a, q) for `op` on `g` (see above).
double nccl_latency_ns(const NcclTuning& t, CollectiveOp op, NcclAlgorithm a, NcclProtocol q, const NcclGroup& g,
                       TimeNs inter_latency);

// The fastest enabled (algorithm, protocol) for `op` (all-reduce, all-gather, reduce-scatter) of
// `bytes` (NCCL's size S) on `g`; bytes 0 or one rank: time 0. InputError when the tuning enables
// no pair the collective can use (a tree only: all-gather and reduce-scatter have rings only).
NcclRun choose_nccl(const NcclTuning& t, CollectiveOp op, double bytes, const NcclGroup& g, const NcclLinks& links);

// What both network models run for `op` (all-reduce, all-gather, reduce-scatter) of `bytes_per_peer`
// per member (NCCL's size S = that x the members) over `group` (world ranks) of `cluster`: the
// choice above with the cluster's tuning and links. One member or no bytes: time 0.
NcclRun nccl_choice(const ClusterSpec& cluster, CollectiveOp op, std::int64_t bytes_per_peer,
                    const std::vector<int>& group);

// The latency of an all-to-all over p members: base + the sum over rounds d = 1..p-1 of the
// largest pair_latency(s, (s + d) mod p). `ceiling`, the largest latency any pair can have, lets a
// round stop looking once it is reached.
double all_to_all_latency_ns(const NcclTuning& t, int p, const std::function<TimeNs(int, int)>& pair_latency,
                             TimeNs ceiling);

}  // namespace moesim
