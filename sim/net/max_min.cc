#include "sim/net/max_min.h"

#include <algorithm>

namespace moesim {

MaxMinSolver::MaxMinSolver(std::vector<double> capacity)
    : capacity_(std::move(capacity)),
      remaining_(capacity_.size(), 0.0),
      weight_(capacity_.size(), 0.0),
      pos_(capacity_.size(), -1),
      on_begin_(capacity_.size(), 0),
      on_end_(capacity_.size(), 0),
      touched_stamp_(capacity_.size(), 0) {}

std::vector<double> MaxMinSolver::solve(std::span<const std::span<const WeightedLink>> flows) {
  std::vector<double> rate(flows.size(), kUnlimitedRate);
  // The flows on each link, in ascending flow index, as one array sliced per link (counted, then
  // filled): a vector per link cost a scattered push_back per (flow, link) on every solve.
  used_.clear();
  for (std::size_t f = 0; f < flows.size(); ++f) {
    for (const WeightedLink& wl : flows[f]) {
      const auto l = static_cast<std::size_t>(wl.link);
      if (on_end_[l] == 0) {
        used_.push_back(wl.link);
        remaining_[l] = capacity_[l];
        weight_[l] = 0.0;
      }
      ++on_end_[l];  // a count until the slices are laid out
      weight_[l] += wl.weight;
    }
  }
  // The scan breaks ties by taking links in ascending id; the heap orders them by id itself.
  if (used_.size() <= kScanLinks) std::sort(used_.begin(), used_.end());
  std::size_t offset = 0;
  for (LinkId l : used_) {
    const auto i = static_cast<std::size_t>(l);
    on_begin_[i] = offset;
    offset += on_end_[i];
    on_end_[i] = on_begin_[i];
  }
  on_.resize(offset);
  for (std::size_t f = 0; f < flows.size(); ++f)
    for (const WeightedLink& wl : flows[f]) on_[on_end_[static_cast<std::size_t>(wl.link)]++] = f;
  frozen_.assign(flows.size(), 0);
  unfrozen_ = 0;
  for (const auto& f : flows) unfrozen_ += f.empty() ? 0 : 1;
  // Both fillings take the same saturation events in the same order (the lowest level, ties by
  // link id) with the same arithmetic, so they give identical rates; the scan is cheaper while
  // few links are in use, the heap when many are.
  if (used_.size() <= kScanLinks) {
    fill_by_scan(flows, rate);
  } else {
    fill_by_heap(flows, rate);
  }
  for (LinkId l : used_) on_end_[static_cast<std::size_t>(l)] = 0;
  return rate;
}

bool MaxMinSolver::open(std::size_t link) const { return weight_[link] > 1e-12; }

void MaxMinSolver::saturate(std::size_t link, double level, std::span<const std::span<const WeightedLink>> flows,
                            std::vector<double>& rate) {
  touched_.clear();
  for (std::size_t k = on_begin_[link]; k < on_end_[link]; ++k) {
    const std::size_t f = on_[k];
    if (frozen_[f]) continue;
    frozen_[f] = 1;
    --unfrozen_;
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
  // Every flow on `link` is frozen now: close it exactly, whatever rounding the subtracted weights
  // left (a leftover above open()'s threshold would have the fillings pick it again forever).
  weight_[link] = 0.0;
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
    if (unfrozen_ == 0) break;
  }
}

void MaxMinSolver::heap_place(std::size_t at, const HeapEntry& e) {
  heap_[at] = e;
  pos_[static_cast<std::size_t>(e.link)] = static_cast<std::ptrdiff_t>(at);
}

void MaxMinSolver::heap_fix(std::size_t at) {
  const HeapEntry e = heap_[at];
  while (at > 0 && heap_less(e, heap_[(at - 1) / kHeapArity])) {
    heap_place(at, heap_[(at - 1) / kHeapArity]);
    at = (at - 1) / kHeapArity;
  }
  heap_place(at, e);
  heap_sift_down(at);
}

void MaxMinSolver::heap_sift_down(std::size_t at) {
  const HeapEntry e = heap_[at];
  const std::size_t n = heap_.size();
  for (;;) {
    const std::size_t first = kHeapArity * at + 1;
    if (first >= n) break;
    std::size_t c = first;
    const std::size_t end = std::min(first + kHeapArity, n);
    for (std::size_t k = first + 1; k < end; ++k)
      if (heap_less(heap_[k], heap_[c])) c = k;
    if (!heap_less(heap_[c], e)) break;
    heap_place(at, heap_[c]);
    at = c;
  }
  heap_place(at, e);
}

void MaxMinSolver::heap_build() {
  for (std::size_t at = 0; at < heap_.size(); ++at)
    pos_[static_cast<std::size_t>(heap_[at].link)] = static_cast<std::ptrdiff_t>(at);
  if (heap_.size() < 2) return;
  for (std::size_t at = (heap_.size() - 2) / kHeapArity + 1; at-- > 0;) heap_sift_down(at);
}

void MaxMinSolver::heap_lower(LinkId l, double level) {
  const auto at = static_cast<std::size_t>(pos_[static_cast<std::size_t>(l)]);
  heap_[at].key = level;
  heap_fix(at);
}

void MaxMinSolver::heap_erase(LinkId l) {
  const auto i = static_cast<std::size_t>(l);
  const auto at = static_cast<std::size_t>(pos_[i]);
  pos_[i] = -1;
  const HeapEntry last = heap_.back();
  heap_.pop_back();
  if (at < heap_.size()) {
    heap_place(at, last);
    heap_fix(at);
  }
}

void MaxMinSolver::fill_by_heap(std::span<const std::span<const WeightedLink>> flows, std::vector<double>& rate) {
  // An indexed min-heap of the open links by (level, link id), a strict order, so the lowest
  // level with ties by id comes first, as in the scan. Each link sits in it once. A saturation
  // lowers a touched link's remaining capacity by its frozen flows' share and its weight by theirs,
  // which (the level being the lowest) seldom lowers its level: a key that would fall is lowered at
  // once, one that rises is left low (stale) and raised only when it reaches the top. Every key is
  // thus at most its link's level, so a top whose key is its level is the lowest (level, id); the
  // events and their arithmetic are those of the scan. With aggregated flows one event touches
  // thousands of links, and re-placing each of them in the heap was most of the solve.
  heap_.clear();
  for (LinkId l : used_) {
    const auto i = static_cast<std::size_t>(l);
    if (open(i)) heap_.push_back({remaining_[i] / weight_[i], l});
  }
  heap_build();
  std::size_t closed = 0;  // links in the heap whose flows are all frozen
  while (!heap_.empty()) {
    const LinkId l = heap_.front().link;
    const auto i = static_cast<std::size_t>(l);
    if (!open(i)) {
      heap_erase(l);
      --closed;
      continue;
    }
    const double level = remaining_[i] / weight_[i];
    if (level != heap_.front().key) {  // stale: its level rose since its key was set
      heap_.front().key = level;
      heap_sift_down(0);
      continue;
    }
    heap_erase(l);
    saturate(i, level, flows, rate);
    if (unfrozen_ == 0) break;
    for (LinkId t : touched_) {
      const auto k = static_cast<std::size_t>(t);
      if (pos_[k] < 0) continue;
      if (!open(k)) {
        // Closed by this event. A link crossed by a zero-weight flow can close while that flow is
        // still unfrozen and be counted again when it freezes: that only brings a rebuild forward.
        ++closed;
        continue;
      }
      const double v = remaining_[k] / weight_[k];
      if (v < heap_[static_cast<std::size_t>(pos_[k])].key) heap_lower(t, v);
    }
    // Once half the heap is closed links, drop them all and rebuild it from the open ones: one
    // linear pass instead of a sift per closed link as it reaches the top (an event freezes flows
    // that close hundreds of links at once in an aggregated all-to-all).
    if (2 * closed > heap_.size()) {
      std::size_t kept = 0;
      for (const HeapEntry& e : heap_) {
        if (open(static_cast<std::size_t>(e.link)))
          heap_[kept++] = e;
        else
          pos_[static_cast<std::size_t>(e.link)] = -1;
      }
      heap_.resize(kept);
      heap_build();
      closed = 0;
    }
  }
  // Every flow has its rate: what is left are closed links, dropped at once rather than popped one
  // by one (each pop a sift through the heap: most of the flow model's time in DeepSeek-V3's step
  // on 1,024 GPUs, where nearly every link of a solve was left closed in the heap).
  for (const HeapEntry& e : heap_) pos_[static_cast<std::size_t>(e.link)] = -1;
  heap_.clear();
}

}  // namespace moesim
