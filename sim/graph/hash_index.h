// HashIndex: task indices by a 64-bit hash of their key, in one flat open-addressing table.
//
// TaskGraph looks every new task's (rank, id) up before adding it; with an unordered_multimap each
// lookup and insert walked heap nodes scattered over memory, 19% of building DeepSeek-V3's step
// graph (588,138 tasks). Here a lookup reads consecutive slots of one array: linear probing from
// the hash's slot, the table at most half full, each slot holding the full hash so that other
// keys are skipped without touching their tasks. Several tasks may share a hash: the caller's
// `match` tells them apart.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "sim/graph/task.h"

namespace moesim {

class HashIndex {
 public:
  void insert(std::uint64_t hash, TaskIndex task) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(hash, task);
    ++size_;
  }

  // The first task stored under `hash` for which match(task) holds, or nothing.
  template <typename Match>
  std::optional<TaskIndex> find(std::uint64_t hash, Match match) const {
    if (slots_.empty()) return std::nullopt;
    for (std::size_t i = home(hash);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.task == kEmpty) return std::nullopt;
      if (s.hash == hash && match(s.task)) return s.task;
    }
  }

  std::size_t size() const { return size_; }

 private:
  static constexpr TaskIndex kEmpty = std::numeric_limits<TaskIndex>::max();
  struct Slot {
    std::uint64_t hash = 0;
    TaskIndex task = kEmpty;
  };

  std::size_t mask() const { return slots_.size() - 1; }
  // Fibonacci hashing: the product's high bits spread hashes whose low bits repeat.
  std::size_t home(std::uint64_t hash) const { return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ULL) >> shift_); }

  void place(std::uint64_t hash, TaskIndex task) {
    std::size_t i = home(hash);
    while (slots_[i].task != kEmpty) i = (i + 1) & mask();
    slots_[i] = Slot{hash, task};
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const std::size_t capacity = old.empty() ? 64 : 2 * old.size();
    slots_.assign(capacity, Slot{});
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    for (const Slot& s : old)
      if (s.task != kEmpty) place(s.hash, s.task);
  }

  std::vector<Slot> slots_;  // a power of two of them, at most half in use
  std::size_t size_ = 0;
  int shift_ = 64;  // 64 - log2(slots)
};

}  // namespace moesim
