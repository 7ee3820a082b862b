#include "sim/build/slot_pool.h"

namespace moesim {

void SlotPool::released_by(std::size_t q, const Node& task) {
  if (releases_.size() <= q) releases_.resize(q + 1);
  releases_[q] = task;
}

const Node& SlotPool::release_before(std::size_t q) const {
  static const Node kNone;
  if (q < distance_ || q - distance_ >= releases_.size()) return kNone;
  return releases_[q - distance_];
}

}  // namespace moesim
