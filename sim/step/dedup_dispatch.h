// The token traffic of a dispatcher that sends each token once per destination node and once per
// destination GPU (DeepEP's normal kernels, deepseek-ai/DeepEP; Megatron-Core's flex dispatcher
// runs them, and NVIDIA's HybridEP moves the same bytes), against the all-to-all dispatcher's one
// row per (token, expert).
//
// DeepEP's internode dispatch sends a token over RDMA to the GPU of the same local rank on each
// node that hosts one of its experts, once however many of its experts that node hosts; that GPU
// forwards it over NVLink to each GPU of its node that hosts one of them, again once per GPU; the
// combine runs the same paths backwards, reducing on the way. moesim simulates the two hops as two
// collectives one after the other (store and forward): an all-to-all among the expert group's
// ranks of one local rank across its nodes, then one among the group's ranks of a node. DeepEP
// pipelines the hops in chunks, so this is an upper bound on its time by at most the NVLink hop.
//
// Bytes follow from the probability that a token's k experts hit a given node or GPU, for a
// uniform routing (every expert equally likely, k distinct experts per token):
//   P(miss a set of s of the E experts) = C(E - s, k) / C(E, k).
// With group-limited routing (ModelSpec::router_groups: the token's experts among its best
// `group_topk` of `num_groups` groups; group_topk <= top_k, checked by the model loader), a node
// or GPU holding whole groups is hit when one of them is chosen (each chosen group assumed to
// receive at least one of the k experts, as DeepSeek-V3's group score, the sum of a group's best
// two experts, makes likely), and one inside a group with P(its group chosen) x P(hit among the
// group's experts by k / group_topk draws) (the k experts assumed spread evenly over the chosen
// groups; a fractional count interpolates linearly). A node or GPU that straddles groups falls back
// to the uniform formula. A GPU is never hit more often than its node.
#pragma once

#include <optional>

#include "sim/spec/model_spec.h"

namespace moesim {

struct DedupHits {
  double node = 1;  // P(a given node of the expert group receives a given token)
  double gpu = 1;   // P(a given GPU (rank) of the group receives it)
};

// P(none of `k` distinct draws from `total` items falls among `set` of them); a fractional k
// interpolates linearly between its floor and its ceiling.
double miss_probability(int total, int set, double k);

// `experts` over `ep` ranks on `nodes` nodes (ep a multiple of nodes, experts of ep), top-k routing,
// optionally group-limited.
DedupHits dedup_hits(int experts, int top_k, int ep, int nodes,
                     const std::optional<ModelSpec::RouterGroups>& groups);

}  // namespace moesim
