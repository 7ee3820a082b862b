// SlotPool: the buffer slots one tensor's chunks share under an MPipeMoE memory-reuse strategy
// (run.strategy s1-s4), and the rule that makes sharing them safe. It is the one place the slot
// rule lives; the memory-reuse policy (memory_reuse.h) makes the pools and adds their edges.
//
// The chunk at sequence position q writes slot q % size. The first writer of a slot allocates it;
// later writers overwrite it, so the writer at position q waits (a reuse edge) for the task that
// released position q - distance, the last reader of the chunk that used the slot before it. A
// tensor whose chunks are restored in backward continues its forward sequence there: backward
// position g is sequence position n + g.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "sim/build/handles.h"

namespace moesim {

class SlotPool {
 public:
  SlotPool() = default;
  // `slots` buffers; the writer of position q reuses the slot of position q - `distance`.
  SlotPool(std::vector<Buf> slots, int distance)
      : slots_(std::move(slots)), distance_(static_cast<std::size_t>(distance)) {}

  const std::vector<Buf>& buffers() const { return slots_; }
  // The slot the writer at position q allocates: its slot when it is that slot's first writer.
  Buf allocated_by(std::size_t q) const { return q < slots_.size() ? slots_[q] : Buf{}; }
  // The slot the chunk at position q occupies: q % size.
  const Buf& slot_of(std::size_t q) const { return slots_[q % slots_.size()]; }
  // Records the task that releases position q's data (its last reader).
  void released_by(std::size_t q, const Node& task);
  // The release the writer at position q must wait for (an empty Node when the slot is fresh).
  const Node& release_before(std::size_t q) const;

 private:
  std::vector<Buf> slots_;
  std::size_t distance_ = 1;
  std::vector<Node> releases_;  // per sequence position
};

}  // namespace moesim
