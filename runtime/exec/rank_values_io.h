// RankValues as bytes, so that the ranks of a one-process-per-rank run (mpirun) can send their
// tensors to rank 0 for the reference check. A header of 16 lengths, then the fourteen float
// tensors and the two index tensors in declaration order.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/exec/layer_executor.h"

namespace moesim::runtime {

std::vector<std::byte> pack_rank_values(const RankValues& values);
// Throws InternalError when the bytes are not what pack_rank_values writes.
RankValues unpack_rank_values(const std::vector<std::byte>& bytes);

}  // namespace moesim::runtime
