#include "sim/net/incremental_max_min.h"

#include <algorithm>

namespace moesim {

IncrementalMaxMin::IncrementalMaxMin(std::vector<double> capacity)
    : solver_(capacity), on_link_(capacity.size()), link_seen_(capacity.size(), 0) {}

IncrementalMaxMin::Slot IncrementalMaxMin::add(std::span<const WeightedLink> links) {
  Slot slot = 0;
  if (free_.empty()) {
    slot = static_cast<Slot>(flows_.size());
    flows_.emplace_back();
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  Entry& e = flows_[slot];
  e.links = links;
  e.order = next_order_++;
  e.rate = kUnlimitedRate;  // a flow crossing no link is unconstrained, and in no component
  e.seen = 0;
  for (const WeightedLink& wl : links) {
    on_link_[static_cast<std::size_t>(wl.link)].push_back(slot);
    dirty_.push_back(wl.link);
  }
  return slot;
}

void IncrementalMaxMin::remove(Slot slot) {
  Entry& e = flows_[slot];
  for (const WeightedLink& wl : e.links) {
    std::vector<Slot>& on = on_link_[static_cast<std::size_t>(wl.link)];
    if (const auto it = std::find(on.begin(), on.end(), slot); it != on.end()) {
      *it = on.back();
      on.pop_back();
    }
    dirty_.push_back(wl.link);
  }
  e.links = {};
  free_.push_back(slot);
}

void IncrementalMaxMin::collect_component(LinkId from) {
  queue_.clear();
  queue_.push_back(from);
  link_seen_[static_cast<std::size_t>(from)] = pass_;
  while (!queue_.empty()) {
    const LinkId l = queue_.back();
    queue_.pop_back();
    for (Slot s : on_link_[static_cast<std::size_t>(l)]) {
      Entry& e = flows_[s];
      if (e.seen == pass_) continue;
      e.seen = pass_;
      component_.push_back(s);
      for (const WeightedLink& wl : e.links) {
        if (link_seen_[static_cast<std::size_t>(wl.link)] == pass_) continue;
        link_seen_[static_cast<std::size_t>(wl.link)] = pass_;
        queue_.push_back(wl.link);
      }
    }
  }
}

void IncrementalMaxMin::resolve() {
  last_solved_ = 0;
  if (dirty_.empty()) return;
  ++pass_;
  component_.clear();
  for (LinkId l : dirty_)
    if (link_seen_[static_cast<std::size_t>(l)] != pass_) collect_component(l);
  dirty_.clear();
  // One solve of the touched components together: disjoint components do not interact, and each
  // keeps its flows in the order they were added.
  std::sort(component_.begin(), component_.end(),
            [this](Slot a, Slot b) { return flows_[a].order < flows_[b].order; });
  spans_.clear();
  for (Slot s : component_) spans_.push_back(flows_[s].links);
  const std::vector<double> rates = solver_.solve(spans_);
  for (std::size_t k = 0; k < component_.size(); ++k) flows_[component_[k]].rate = rates[k];
  last_solved_ = component_.size();
}

}  // namespace moesim
