// Expert-parallel, chunked execution of the CPU reference layer, with the memory strategies'
// restore paths: the data flow the GPU executor (and its one-GPU loopback transport) will run,
// played out on the host in double precision.
//
// R ranks each own a batch of B tokens and E_l = E / R experts (rank q owns experts q*E_l ..
// q*E_l + E_l - 1). The capacity dimension is split into n chunks of C/n slots (Tutel's split, as
// the simulator's builder does: chunk c holds slots [c*C/n, (c+1)*C/n) of every expert). Per chunk:
//   dispatch   rank r sends to q the block [E_l, C/n, M] of its dispatch tensor for q's experts;
//              q receives [R (source), E_l, C/n, M] (a pairwise all-to-all, done as a buffer
//              permutation: recv[q] block r = send[r] block q);
//   experts    q runs FC1 / act / FC2 of each local expert over its R*C/n rows, in (source, slot)
//              order;
//   combine    the inverse all-to-all; rank r scatters the rows into its [E, C, M] output.
// Backward mirrors it: the all-to-all of dT_O per chunk, the expert backward, the all-to-all of dDI.
//
// Buffers follow sim/build/memory_reuse.h: with strategy none every chunk keeps its T_DI / T_M / T_DO;
// with s1-s4, T_DI lives in min(slots, 2n) slot buffers, T_M in one and T_DO in min(slots, n), the
// chunk at sequence position q (forward position g, backward position n + g) writing slot
// q % count, so later chunks really overwrite earlier ones. Backward restores into the slots
// (MPipeMoE Table II): T_DI by H2D prefetch of its forward offload (s1, s3) or by re-encoding the
// chunk from T_I and re-running the dispatch all-to-all (s2, s4); T_M by prefetch (s1, s2) or by
// recomputing FC1 from the restored T_DI (s3, s4). T_M here is FC1's output h (F wide), from which
// the activation is re-applied elementwise (bit-identical).
//
// Guarantees (tested): y, dX and the gate gradient equal the unpartitioned layer
// (run_unpartitioned) bit for bit for every R and n; the expert gradients bit for bit at n = 1 and
// up to double rounding for n > 1 (each expert accumulates its rows chunk by chunk); at fixed
// (R, n) every strategy gives bit-identical results.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/reference/moe_reference.h"
#include "sim/spec/types.h"

namespace moesim::runtime::reference {

struct ExpertParallelOptions {
  int ep_size = 1;     // R: ranks, each with one batch of tokens and E/R experts
  int num_chunks = 1;  // n: must divide C
  MemoryStrategy strategy = MemoryStrategy::kNone;
  int slots = 2;       // buffer slots per reused tensor with s1-s4: 1 or 2
};

// Per rank, the work each path did: what tells the strategies apart (MPipeMoE Table II's Q).
struct ExecutionCounts {
  std::int64_t all_to_alls = 0;      // dispatch, combine and their gradients, plus re-dispatches
  std::int64_t redispatches = 0;     // all-to-alls re-run to restore T_DI (s2, s4)
  std::int64_t d2h_copies = 0;       // offloads (s1-s3)
  std::int64_t h2d_copies = 0;       // prefetches (s1-s3)
  std::int64_t fc1_recomputes = 0;   // expert FC1 GEMM batches re-run (s3, s4), one per chunk
  bool operator==(const ExecutionCounts&) const = default;
};

struct ExpertParallelResult {
  std::vector<Matrix> y;   // per rank, B x M
  std::vector<Matrix> dx;  // per rank, B x M
  // dgate summed over the ranks in rank order (the data-parallel all-reduce of the replicated
  // gate); the expert gradients per global expert, from its owner rank. dx / dlogits / dscores of
  // this struct are unused (see dx above).
  MoeGradients grads;
  ExecutionCounts counts;  // of one rank (all ranks do the same work)
};

// One process owning all E experts runs every rank's batch: the ground truth for the partitioned
// runs (batch r is routed with its own capacity C, as on rank r). With `forced_topk`, batch r
// takes the experts (*forced_topk)[r] (see route()).
ExpertParallelResult run_unpartitioned(const MoeLayerShape& shape, const MoeLayerParams& params,
                                       const std::vector<Matrix>& x, const std::vector<Matrix>& dy,
                                       const std::vector<std::vector<int>>* forced_topk = nullptr);

// x and dy hold one batch per rank. Throws InputError when E is not divisible by R, C by n, the
// batch count is not R, or slots is not 1 or 2.
ExpertParallelResult run_expert_parallel(const MoeLayerShape& shape, const MoeLayerParams& params,
                                         const std::vector<Matrix>& x, const std::vector<Matrix>& dy,
                                         const ExpertParallelOptions& options);

}  // namespace moesim::runtime::reference
