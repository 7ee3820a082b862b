#include "sim/step/dedup_dispatch.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"

namespace moesim {

namespace {
double miss_whole(int total, int set, int k) {
  double p = 1.0;
  for (int i = 0; i < k; ++i) {
    const int left = total - set - i;
    if (left <= 0) return 0.0;
    p *= static_cast<double>(left) / static_cast<double>(total - i);
  }
  return p;
}
}  // namespace

double miss_probability(int total, int set, double k) {
  MOESIM_CHECK(total > 0 && set >= 0 && set <= total && k >= 0 && k <= total, "miss_probability out of range");
  const int lo = static_cast<int>(std::floor(k));
  const double frac = k - lo;
  const double a = miss_whole(total, set, lo);
  return frac == 0.0 ? a : (1 - frac) * a + frac * miss_whole(total, set, lo + 1);
}

DedupHits dedup_hits(int experts, int top_k, int ep, int nodes,
                     const std::optional<ModelSpec::RouterGroups>& groups) {
  MOESIM_CHECK(nodes >= 1 && ep % nodes == 0 && experts % ep == 0, "dedup_hits: uneven layout");
  const int per_gpu = experts / ep;
  const int per_node = experts / nodes;
  DedupHits h{1 - miss_probability(experts, per_node, top_k), 1 - miss_probability(experts, per_gpu, top_k)};
  if (!groups) return h;
  const int g = groups->num_groups;
  const int m = groups->group_topk;
  const int per_group = experts / g;
  // A set of s experts (a node's or a GPU's) made of whole groups is hit when one of its groups is
  // chosen; a set inside one group when that group is chosen and one of its k / m draws lands in it.
  const auto hit = [&](int set, double fallback) {
    if (set % per_group == 0) return 1 - miss_probability(g, set / per_group, m);
    if (per_group % set == 0)
      return static_cast<double>(m) / g * (1 - miss_probability(per_group, set, static_cast<double>(top_k) / m));
    return fallback;  // the set straddles groups: the uniform formula
  };
  h.node = hit(per_node, h.node);
  h.gpu = std::min(hit(per_gpu, h.gpu), h.node);  // a GPU's token has reached its node
  return h;
}

}  // namespace moesim
