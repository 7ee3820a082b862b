// All-reduce, all-gather and reduce-scatter as flows, by the algorithm and protocol NCCL chooses
// for their size (nccl_model.h). A plan is NCCL's latency as a fixed step, then:
//   ring: 2(p-1) steps (all-reduce) or p-1; in each, every member sends b / efficiency to the next.
//     Across nodes there are c = min(channels, m) rings side by side, each carrying 1/c of the
//     bytes; ring k visits each node's members from its k-th on, so it enters and leaves every
//     node through different GPUs, and the c rings cross the network through c different NICs
//     (NCCL builds one ring per channel this way; PXN is not modelled). Within one node, one ring
//     in group order (the channels share the same links).
//     Latency-bound rings -- their bytes alone take no longer than NCCL's latency: steps x b' / r
//     <= latency, b' a hop's bytes in one step, r the fair share of the most crowded link (its
//     capacity over the hops of every ring routed across it) -- run as one coflow carrying every
//     step of every ring (`aggregate`, the default): a weighted flow whose weight on a link is the
//     number of hops routed across it, which shares links max-min as that many flows would. Alone
//     it takes ceil(steps x b' / r), where one flow per hop and step (the steps as repeats of a
//     phase, each ending with its slowest hop) takes steps x ceil(b' / r): r is the slowest hop's
//     max-min rate in both, and no other hop's end raises it (every flow on its bottleneck link
//     has it), so they are less than 1 ns a step apart. It costs two flow events instead of two or
//     more per step: rings over 128 ranks no longer solve their links' max-min components again
//     127 times over. Other rings keep one flow per hop and step: beside changing traffic a coflow
//     moves their many bytes differently (every hop at the slowest one's pace, no burst per step),
//     which moves step times (docs/network.md).
//   tree (all-reduce): one phase, pipelined as NCCL runs it: in every node a chain through its
//     members (c chains, rotated as the rings) carries the reduction up and the result down, S / c
//     each way per chain link; between nodes NCCL's double binary tree (two binary trees, the
//     second shifted by one node for an even count and mirrored for an odd one, each reducing and
//     broadcasting half of S) joins the chains' heads, 1/c of each half per channel.
// Bytes are divided by the protocol's efficiency.
#pragma once

#include <vector>

#include "sim/graph/task.h"
#include "sim/net/collective_plan.h"
#include "sim/net/topology.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

// Appends the phases of `work` (not an all-to-all) over `group` to `plan`; nothing for one rank
// or no bytes. aggregate: latency-bound rings as one coflow (above); else one flow per hop and
// step.
void add_tuned_phases(const ClusterTopology& topo, const ClusterSpec& cluster, const CollectiveWork& work,
                      const std::vector<int>& group, bool aggregate, CollectivePlan& plan);

// The parent of node position r (0-based) in NCCL's binary tree over n positions, -1 for the root
// (position 0): r with lowest set bit k hangs under r with bit k cleared and bit 2k set, or, when
// that is not below n, with bit k cleared only (the shape src/graph/trees.cc of NCCL builds:
// leaves at the odd positions, so the shifted second tree makes them inner nodes).
int nccl_tree_parent(int r, int n);

}  // namespace moesim
