// What Megatron-Core's all-to-all token dispatcher (MoEAlltoAllTokenDispatcher,
// megatron/core/transformer/moe/token_dispatcher.py, read at NVIDIA/Megatron-LM commit
// d98e8a64ddf34856e74b24714e3bedb2f5a39553) does around the tokens' all-to-alls that MoeMlp emits,
// for a dropless layer with expert parallelism (the expert group has more than one member):
//
// - Routing metadata (preprocess): each rank's token count per expert is all-gathered over the
//   tensor x expert-parallel group (gather_from_sequence_parallel_region(..., tp_ep_group): E
//   int64 counts per rank), on the compute stream, so the permutation waits for it. The split
//   sizes the all-to-all needs on the host (tokens_per_expert, input_splits, output_splits,
//   output_splits_tp: E / ep, ep, ep and etp int64 values, one cudaMemcpy each) are copied to the
//   host on a side stream issued before the permutation ("before_permutation_1"), and the host
//   waits for them (d2h_event.synchronize() at "before_ep_alltoall") before it issues the
//   dispatch: the dispatch starts after both the permutation and the last copy.
// - The routing probabilities' all-to-all after the tokens' (token_dispatch: one value per row,
//   in the model's dtype here; an fp32 router doubles it), and in backward its gradient's.
// - With more than one local expert, sort_chunks_by_idxs (moe_utils.py; fused: Transformer
//   Engine's moe_sort_chunks_by_index): the received rows sorted from (source rank, expert)
//   order into expert order after the dispatch (with their probabilities), and back before the
//   combine; in backward the gradients' inverse sorts. Each reads and writes every row once.
//
// Partial: the host's wake-up and its launch of the dispatch after the wait are not priced (no
// sourced figure), nor the synchronisation a layer without expert parallelism makes for the
// grouped GEMM's split sizes ("before_finish"). Megatron-Core's flex dispatcher (DeepEP) sends
// each token once per destination rank and permutes the received tokens into expert order
// instead; with --dispatcher deepep moesim moves its bytes (sim/step/dedup_dispatch.h), the
// probabilities inside the tokens' dispatch, and keeps the rest of this dispatcher's work (the
// counts' all-gather and the host's wait stand for DeepEP's notify and its host wait for the
// received counts; the sorts for the flex dispatcher's permutation).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/step/step_emitter.h"

namespace moesim {

struct MoeDims;

// The rows a piece of the dispatcher's work covers (a chunk's, --chunks) and its id suffix.
struct ChunkRows {
  std::int64_t rows = 0;
  std::string suffix;
  // Under an imbalanced routing, the chunk's probabilities' traffic (an all-to-allv); null: uniform.
  std::shared_ptr<const TrafficMatrix> traffic = nullptr;
};

class MoeDispatcher {
 public:
  MoeDispatcher(StepEmitter& emitter, const MoeDims& dims) : e_(emitter), d_(dims) {}

  // Whether the stage's layers dispatch over more than one rank (all of the above applies).
  bool active(int stage) const;
  // The counts' all-gather on the chain, then the split sizes' copies to the host beside it.
  // Returns the last copy, which the dispatch must wait for (the host's synchronisation).
  std::optional<TaskIndex> routing_metadata(Chain& chain, int layer, const std::string& prefix);
  // The probabilities' all-to-all (or its gradient's) after the tokens' on the chain.
  void probs_all_to_all(Chain& chain, int layer, Pass pass, const std::string& what, bool to_experts,
                        const std::string& prefix, const ChunkRows& rows);
  // One sort_chunks_by_idxs over the received rows (with their probabilities when `probs`).
  void sort_chunks(Chain& chain, int layer, Pass pass, const std::string& what, bool probs,
                   const std::string& prefix, const ChunkRows& rows);

  // The host copies of the split sizes, bytes each, in the order Megatron-Core issues them.
  std::vector<std::int64_t> split_size_copies(int stage) const;

 private:
  TaskName name(int layer, Pass pass, const std::string& what, const std::string& stage) const {
    return TaskName{"L" + std::to_string(layer), layer, pass, what, stage};
  }
  // The expert tensor x expert-parallel group of the stage's representative rank (each expert-parallel
  // member with its expert tensor-parallel peers, etp ranks fastest; etp = tp unless folded).
  std::vector<int> tensor_expert_group(int stage) const;

  StepEmitter& e_;
  const MoeDims& d_;
};

}  // namespace moesim
