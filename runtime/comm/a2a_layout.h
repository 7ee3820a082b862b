// Where the bytes of an all-to-all go: the per-peer blocks of the MoE layer's dispatch and
// combine, and the displacements of an all-to-allv. Pure host logic, shared by every transport.
//
// The source side of a chunk is [R][E_l][C/n][M] (dispatch_layout.h: the block for peer q is
// contiguous); the expert side is [E_l][R][C/n][M], so that each local expert's rows from all
// sources are contiguous for one strided-batched GEMM. A block therefore travels as E_l pieces of
// C/n*M elements: contiguous on the source side, strided by R*C/n*M on the expert side.
#pragma once

#include <cstdint>
#include <vector>

namespace moesim::runtime {

// The block exchanged with peer p: `pieces` pieces of piece_bytes, piece i at
// p * peer_stride + i * piece_stride bytes from the buffer's base.
struct BlockLayout {
  std::int64_t peer_stride = 0;
  std::int64_t piece_stride = 0;
  std::int64_t piece_bytes = 0;
  int pieces = 1;

  std::int64_t offset(int peer, int piece) const { return peer * peer_stride + piece * piece_stride; }
  std::int64_t block_bytes() const { return piece_bytes * pieces; }
  // The span of bytes a buffer of `peers` blocks covers (its size).
  std::int64_t extent(int peers) const;
  // Whether a block is one contiguous run of bytes (then it travels as one message).
  bool contiguous() const { return pieces == 1 || piece_stride == piece_bytes; }
};

// ep ranks, local_experts E_l, per_chunk = C/n slots, row_bytes = M * element bytes.
BlockLayout source_side_layout(int ep, int local_experts, std::int64_t per_chunk, std::int64_t row_bytes);
BlockLayout expert_side_layout(int ep, int local_experts, std::int64_t per_chunk, std::int64_t row_bytes);

// Exclusive prefix sums: displacement of each peer's part in a packed all-to-allv buffer.
std::vector<std::int64_t> displacements(const std::vector<std::int64_t>& counts);

// Throws InputError unless what every rank sends to each peer is what that peer expects:
// send[r][q] == recv[q][r] (counts in bytes, one row per rank).
void check_all_to_allv_counts(const std::vector<std::vector<std::int64_t>>& send,
                              const std::vector<std::vector<std::int64_t>>& recv);

}  // namespace moesim::runtime
