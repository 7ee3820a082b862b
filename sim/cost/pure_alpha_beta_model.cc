#include "sim/cost/pure_alpha_beta_model.h"

#include <algorithm>

#include <string>

#include "sim/core/checked_math.h"
#include "sim/core/duration.h"
#include "sim/core/error.h"

namespace moesim {

PureAlphaBetaModel::PureAlphaBetaModel(const TaskGraph& graph, const ClusterSpec& cluster)
    : graph_(graph), pcie_(cluster) {
  if (!cluster.alpha_beta) {
    throw InputError(cluster.origin, "cluster " + cluster.name +
                                         " has no alpha_beta section, needed by the pure "
                                         "alpha-beta cost model");
  }
  costs_ = *cluster.alpha_beta;
}

TimeNs PureAlphaBetaModel::isolated_duration(const Task& task) const {
  if (const auto* g = std::get_if<GemmWork>(&task.work)) {
    const double ns =
        (costs_.gemm_alpha_s + costs_.gemm_beta_s_per_flop * static_cast<double>(g->flops())) * kNsPerS;
    return to_duration_ns(ns, true, "GEMM " + task.id);
  }
  if (const auto* c = std::get_if<CollectiveWork>(&task.work)) {
    const auto members = static_cast<std::int64_t>(graph_.group(c->group).size());
    const double bytes = c->is_all_to_allv() ? static_cast<double>(largest_member_bytes(*c))
                                             : static_cast<double>(checked_mul(c->bytes_per_peer, members));
    const double ns = (costs_.a2a_alpha_s + costs_.a2a_beta_s_per_byte * bytes) * kNsPerS;
    return to_duration_ns(ns, true, "collective " + task.id);
  }
  if (const auto* copy = std::get_if<CopyWork>(&task.work)) {
    return copy->direction == CopyDirection::kDeviceToDevice ? 0 : pcie_.copy_duration(*copy);
  }
  if (const auto* h = std::get_if<HostWork>(&task.work)) return pcie_.host_duration(*h);
  return 0;  // elementwise
}

std::int64_t PureAlphaBetaModel::largest_member_bytes(const CollectiveWork& work) const {
  // Transposing swaps what members send and receive, so the answer does not depend on it.
  if (auto it = allv_bytes_.find(work.traffic); it != allv_bytes_.end()) return it->second;
  const int p = work.traffic->size;
  std::int64_t largest = 0;
  for (int a = 0; a < p; ++a) {
    std::int64_t out = 0, in = 0;
    for (int b = 0; b < p; ++b) {
      out = checked_add(out, work.pair_bytes(a, b));
      in = checked_add(in, work.pair_bytes(b, a));
    }
    largest = std::max({largest, out, in});
  }
  allv_bytes_.emplace(work.traffic, largest);
  return largest;
}

void PureAlphaBetaModel::start(TaskIndex task, TimeNs now, const Concurrency&) {
  activities_.add(task, isolated_duration(graph_.task(task)), now, 1.0);
}

void PureAlphaBetaModel::advance_to(TimeNs now, std::vector<TaskIndex>& finished) {
  activities_.advance_to(now, finished);
}

}  // namespace moesim
