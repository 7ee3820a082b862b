#include "sim/net/max_min.h"

#include <algorithm>
#include <queue>
#include <tuple>

namespace moesim {

MaxMinSolver::MaxMinSolver(std::vector<double> capacity)
    : capacity_(std::move(capacity)),
      remaining_(capacity_.size(), 0.0),
      weight_(capacity_.size(), 0.0),
      flows_on_(capacity_.size()) {}

std::vector<double> MaxMinSolver::solve(std::span<const std::span<const WeightedLink>> flows) {
  std::vector<double> rate(flows.size(), kUnlimitedRate);
  std::vector<LinkId> used;
  for (std::size_t f = 0; f < flows.size(); ++f) {
    for (const WeightedLink& wl : flows[f]) {
      const auto l = static_cast<std::size_t>(wl.link);
      if (flows_on_[l].empty()) {
        used.push_back(wl.link);
        remaining_[l] = capacity_[l];
        weight_[l] = 0.0;
      }
      flows_on_[l].push_back(f);
      weight_[l] += wl.weight;
    }
  }
  // (level, link, version): the heap holds stale entries; an entry is live when its version is the
  // link's current one.
  using Entry = std::tuple<double, LinkId, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  std::vector<LinkId> sorted = used;
  std::sort(sorted.begin(), sorted.end());
  const auto pos = [&](LinkId l) {
    return static_cast<std::size_t>(std::lower_bound(sorted.begin(), sorted.end(), l) - sorted.begin());
  };
  std::vector<int> ver(sorted.size(), 0);
  for (LinkId l : sorted) {
    const auto i = static_cast<std::size_t>(l);
    if (weight_[i] > 0) heap.emplace(remaining_[i] / weight_[i], l, 0);
  }
  std::vector<bool> frozen(flows.size(), false);
  while (!heap.empty()) {
    const auto [level, l, v] = heap.top();
    heap.pop();
    const std::size_t p = pos(l);
    const auto li = static_cast<std::size_t>(l);
    if (v != ver[p] || !(weight_[li] > 1e-12)) continue;
    for (std::size_t f : flows_on_[li]) {
      if (frozen[f]) continue;
      frozen[f] = true;
      rate[f] = std::max(level, 0.0);
      for (const WeightedLink& wl : flows[f]) {
        const auto k = static_cast<std::size_t>(wl.link);
        remaining_[k] = std::max(0.0, remaining_[k] - wl.weight * rate[f]);
        weight_[k] -= wl.weight;
        const std::size_t q = pos(wl.link);
        ++ver[q];
        if (weight_[k] > 1e-12) heap.emplace(remaining_[k] / weight_[k], wl.link, ver[q]);
      }
    }
  }
  for (LinkId l : used) flows_on_[static_cast<std::size_t>(l)].clear();
  return rate;
}

}  // namespace moesim
