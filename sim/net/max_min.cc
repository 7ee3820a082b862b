#include "sim/net/max_min.h"

#include <algorithm>
#include <tuple>

namespace moesim {

MaxMinSolver::MaxMinSolver(std::vector<double> capacity)
    : capacity_(std::move(capacity)),
      remaining_(capacity_.size(), 0.0),
      weight_(capacity_.size(), 0.0),
      version_(capacity_.size(), 0),
      flows_on_(capacity_.size()),
      touched_stamp_(capacity_.size(), 0) {}

std::vector<double> MaxMinSolver::solve(std::span<const std::span<const WeightedLink>> flows) {
  std::vector<double> rate(flows.size(), kUnlimitedRate);
  used_.clear();
  for (std::size_t f = 0; f < flows.size(); ++f) {
    for (const WeightedLink& wl : flows[f]) {
      const auto l = static_cast<std::size_t>(wl.link);
      if (flows_on_[l].empty()) {
        used_.push_back(wl.link);
        remaining_[l] = capacity_[l];
        weight_[l] = 0.0;
        version_[l] = 0;
      }
      flows_on_[l].push_back(f);
      weight_[l] += wl.weight;
    }
  }
  std::sort(used_.begin(), used_.end());
  frozen_.assign(flows.size(), 0);
  // Both fillings take the same saturation events in the same order (the lowest level, ties by
  // link id) with the same arithmetic, so they give identical rates; the scan is cheaper while
  // few links are in use, the heap when many are.
  if (used_.size() <= kScanLinks) {
    fill_by_scan(flows, rate);
  } else {
    fill_by_heap(flows, rate);
  }
  for (LinkId l : used_) flows_on_[static_cast<std::size_t>(l)].clear();
  return rate;
}

bool MaxMinSolver::open(std::size_t link) const { return weight_[link] > 1e-12; }

void MaxMinSolver::saturate(std::size_t link, double level, std::span<const std::span<const WeightedLink>> flows,
                            std::vector<double>& rate) {
  touched_.clear();
  for (std::size_t f : flows_on_[link]) {
    if (frozen_[f]) continue;
    frozen_[f] = 1;
    rate[f] = std::max(level, 0.0);
    for (const WeightedLink& wl : flows[f]) {
      const auto k = static_cast<std::size_t>(wl.link);
      remaining_[k] = std::max(0.0, remaining_[k] - wl.weight * rate[f]);
      weight_[k] -= wl.weight;
      if (touched_stamp_[k] != stamp_) {
        touched_stamp_[k] = stamp_;
        touched_.push_back(wl.link);
      }
    }
  }
  ++stamp_;
}

void MaxMinSolver::fill_by_scan(std::span<const std::span<const WeightedLink>> flows, std::vector<double>& rate) {
  // open_ holds the links still open, in ascending id; each event takes the lowest level.
  open_.clear();
  for (LinkId l : used_)
    if (open(static_cast<std::size_t>(l))) open_.push_back(l);
  while (!open_.empty()) {
    std::size_t best = 0;
    double best_level = 0;
    std::size_t kept = 0;
    for (LinkId l : open_) {
      const auto i = static_cast<std::size_t>(l);
      if (!open(i)) continue;  // closed by an earlier event: drop it
      const double level = remaining_[i] / weight_[i];
      if (kept == 0 || level < best_level) {
        best = kept;
        best_level = level;
      }
      open_[kept++] = l;
    }
    open_.resize(kept);
    if (kept == 0) break;
    saturate(static_cast<std::size_t>(open_[best]), best_level, flows, rate);
  }
}

void MaxMinSolver::fill_by_heap(std::span<const std::span<const WeightedLink>> flows, std::vector<double>& rate) {
  // A min-heap of (level, link, version) with stale entries: an entry is live when its version is
  // the link's current one.
  heap_.clear();
  const auto push = [this](double level, LinkId l, int v) {
    heap_.emplace_back(level, l, v);
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
  };
  for (LinkId l : used_) {
    const auto i = static_cast<std::size_t>(l);
    if (open(i)) push(remaining_[i] / weight_[i], l, 0);
  }
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
    const auto [level, l, v] = heap_.back();
    heap_.pop_back();
    const auto li = static_cast<std::size_t>(l);
    if (v != version_[li] || !open(li)) continue;
    saturate(li, level, flows, rate);
    // One new entry per link the event touched, at its final level: nothing was popped in
    // between, so entries for intermediate levels would only go stale.
    for (LinkId t : touched_) {
      const auto k = static_cast<std::size_t>(t);
      ++version_[k];
      if (open(k)) push(remaining_[k] / weight_[k], t, version_[k]);
    }
  }
}

}  // namespace moesim
