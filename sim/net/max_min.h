// Max-min fair rates of flows sharing links, by progressive filling (water-filling).
//
// Bertsekas & Gallager, Data Networks, section 6.5.2: raise every flow's rate together; when a link
// saturates, freeze the flows crossing it at the current level, and continue with the rest. A flow
// here may stand for several identical flows (an aggregated class, collective_plan.h): it puts
// `weight` times its rate on a link it crosses. With weight w on link l for flow f, link l
// saturates at level  (capacity_l - load of frozen flows) / (sum of weights of unfrozen flows).
// Deterministic: links saturating at the same level are taken in ascending id. A flow crossing no
// link is unconstrained (rate = +infinity).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "sim/net/topology.h"

namespace moesim {

struct WeightedLink {
  LinkId link = 0;
  double weight = 1.0;
};

inline constexpr double kUnlimitedRate = std::numeric_limits<double>::infinity();

class MaxMinSolver {
 public:
  // capacity[l]: bytes per ns of link l.
  explicit MaxMinSolver(std::vector<double> capacity);

  // Rates (bytes per ns) of `flows`, each given by the links it crosses with their weights.
  std::vector<double> solve(std::span<const std::span<const WeightedLink>> flows);

 private:
  // Up to this many links in use, each event scans them for the lowest level; above, a heap.
  static constexpr std::size_t kScanLinks = 256;

  bool open(std::size_t link) const;  // some unfrozen flow still crosses it
  // Freezes the unfrozen flows crossing `link` at `level`; touched_ lists the links they cross.
  void saturate(std::size_t link, double level, std::span<const std::span<const WeightedLink>> flows,
                std::vector<double>& rate);
  void fill_by_scan(std::span<const std::span<const WeightedLink>> flows, std::vector<double>& rate);
  // The indexed heap of fill_by_heap: links ordered by (key, id); pos_ is a link's index in it.
  // The key sits beside the link in the heap, so that comparisons read no other array. Four
  // children a node: half the levels of a binary heap, a node's children in one cache line (the
  // sift-downs were a third of the flow model's time in DeepSeek-V3's step on 1,024 GPUs); the
  // order (key, id) is strict, so any arity pops the same sequence.
  static constexpr std::size_t kHeapArity = 4;
  struct HeapEntry {
    double key = 0;
    LinkId link = 0;
  };
  static bool heap_less(const HeapEntry& a, const HeapEntry& b) {
    return a.key < b.key || (a.key == b.key && a.link < b.link);
  }
  void heap_place(std::size_t at, const HeapEntry& e);
  void heap_fix(std::size_t at);        // moves the entry at `at` up or down to its place
  void heap_sift_down(std::size_t at);  // moves it down only (its key rose, or a heap is built)
  void heap_build();  // orders heap_ (Floyd's bottom-up construction) and sets pos_
  void heap_lower(LinkId l, double level);  // a key that falls
  void heap_erase(LinkId l);
  void fill_by_heap(std::span<const std::span<const WeightedLink>> flows, std::vector<double>& rate);

  std::vector<double> capacity_;
  // Scratch, indexed by link; only the entries of links in use are touched and reset.
  std::vector<double> remaining_;
  std::vector<double> weight_;
  std::vector<std::ptrdiff_t> pos_;   // per link: its index in heap_, -1 when not in it
  // Flows crossing link l: on_[on_begin_[l] .. on_end_[l]); on_end_ is 0 for links not in use.
  std::vector<std::size_t> on_begin_;
  std::vector<std::size_t> on_end_;
  std::vector<std::size_t> on_;
  // Scratch of one solve, kept to avoid reallocating on every call.
  std::vector<LinkId> used_;
  std::vector<HeapEntry> heap_;
  std::vector<char> frozen_;
  std::size_t unfrozen_ = 0;                   // flows crossing a link and not yet frozen
  std::vector<LinkId> open_;                   // fill_by_scan's open links
  std::vector<LinkId> touched_;                // links whose level changed in one saturation event
  std::vector<std::uint64_t> touched_stamp_;   // per link: the event that last touched it
  std::uint64_t stamp_ = 1;
};

}  // namespace moesim
