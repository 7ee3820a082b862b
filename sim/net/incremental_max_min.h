// Max-min fair rates of a changing set of flows, re-solved only where a change can move them.
//
// Flows are connected when they cross a common link; max-min fairness decomposes exactly over the
// connected components of that relation (progressive filling in one component never reads or
// writes a link of another). When flows are added or removed, only the components holding their
// links are solved again; every other flow keeps its rate. The touched components are handed to
// MaxMinSolver with their flows in the order they were added, as a solve of every flow would list
// them, so each link sees the same flows in the same order, the same saturation events and the
// same arithmetic: the rates are those of a global solve bit for bit
// (IncrementalMaxMin.RatesEqualAGlobalSolveBitForBit).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/net/max_min.h"

namespace moesim {

class IncrementalMaxMin {
 public:
  using Slot = std::uint32_t;

  // capacity[l]: bytes per ns of link l.
  explicit IncrementalMaxMin(std::vector<double> capacity);

  // Adds a flow over `links` (kept by reference: they must outlive the flow); its rate is known
  // after the next resolve(). A slot freed by remove() may be given again.
  Slot add(std::span<const WeightedLink> links);
  void remove(Slot slot);
  // Solves again the components that flows were added to or removed from since the last call.
  void resolve();
  double rate(Slot slot) const { return flows_[slot].rate; }
  std::size_t size() const { return flows_.size() - free_.size(); }
  // How many flows the last resolve() solved (those of the components it touched).
  std::size_t last_solved() const { return last_solved_; }

 private:
  struct Entry {
    std::span<const WeightedLink> links;
    std::uint64_t order = 0;  // when it was added: the global solve's order of flows
    double rate = kUnlimitedRate;
    std::uint64_t seen = 0;   // the resolve() that last reached it
  };
  // Adds every flow reachable from link `from` over shared links to component_.
  void collect_component(LinkId from);

  MaxMinSolver solver_;
  std::vector<Entry> flows_;
  std::vector<Slot> free_;
  std::vector<std::vector<Slot>> on_link_;  // per link: the flows crossing it, in no order
  std::vector<std::uint64_t> link_seen_;    // per link: the resolve() that last reached it
  std::vector<LinkId> dirty_;               // links of the flows added or removed since resolve()
  std::uint64_t next_order_ = 0;
  std::uint64_t pass_ = 0;
  std::size_t last_solved_ = 0;
  // Scratch of resolve(), kept between calls.
  std::vector<LinkId> queue_;
  std::vector<Slot> component_;
  std::vector<std::span<const WeightedLink>> spans_;
};

}  // namespace moesim
