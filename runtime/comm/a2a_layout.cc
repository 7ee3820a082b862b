#include "runtime/comm/a2a_layout.h"

#include <string>

#include "sim/core/error.h"

namespace moesim::runtime {

std::int64_t BlockLayout::extent(int peers) const {
  if (peers <= 0) return 0;
  // The last byte of the last piece of the last peer, plus one.
  return offset(peers - 1, pieces - 1) + piece_bytes;
}

BlockLayout source_side_layout(int ep, int local_experts, std::int64_t per_chunk, std::int64_t row_bytes) {
  (void)ep;
  BlockLayout l;
  l.piece_bytes = per_chunk * row_bytes;
  l.pieces = local_experts;
  l.piece_stride = l.piece_bytes;
  l.peer_stride = l.piece_bytes * local_experts;
  return l;
}

BlockLayout expert_side_layout(int ep, int local_experts, std::int64_t per_chunk, std::int64_t row_bytes) {
  BlockLayout l;
  l.piece_bytes = per_chunk * row_bytes;
  l.pieces = local_experts;
  l.peer_stride = l.piece_bytes;
  l.piece_stride = l.piece_bytes * ep;
  return l;
}

std::vector<std::int64_t> displacements(const std::vector<std::int64_t>& counts) {
  std::vector<std::int64_t> d(counts.size(), 0);
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    d[i] = sum;
    sum += counts[i];
  }
  return d;
}

void check_all_to_allv_counts(const std::vector<std::vector<std::int64_t>>& send,
                              const std::vector<std::vector<std::int64_t>>& recv) {
  const std::size_t n = send.size();
  if (recv.size() != n) throw InputError("all-to-allv: send and receive counts cover different rank counts");
  for (std::size_t r = 0; r < n; ++r) {
    if (send[r].size() != n || recv[r].size() != n)
      throw InputError("all-to-allv: rank " + std::to_string(r) + " gives counts for " +
                       std::to_string(send[r].size()) + " peers, the group has " + std::to_string(n));
    for (std::size_t q = 0; q < n; ++q) {
      if (send[r][q] < 0) throw InputError("all-to-allv: negative count");
      if (send[r][q] != recv[q][r])
        throw InputError("all-to-allv: rank " + std::to_string(r) + " sends " + std::to_string(send[r][q]) +
                         " bytes to rank " + std::to_string(q) + ", which expects " + std::to_string(recv[q][r]));
    }
  }
}

}  // namespace moesim::runtime
