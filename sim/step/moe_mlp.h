// The MoE MLP of a transformer layer for one microbatch on one pipeline stage, as Megatron-Core
// runs it with expert tensor parallelism equal to the tensor-parallel size (TED's layout, and
// sim/memory/model_states.h's): between the block's tensor-parallel all-gather (sequence
// parallelism) and its reduce-scatter or all-reduce, each rank of a tensor-parallel group holds
// the group's N tokens; it routes them (router GEMM, top-k), permutes its k x N choices into expert
// order, sends them over the expert-parallel group (an all-to-all, ep ranks strided by tp x cp:
// StepShape::expert_group), runs its E / ep local experts as batched GEMMs with the experts'
// columns split over the tensor-parallel ranks, sends the rows back and un-permutes them into
// partial sums that the block's reduction adds up. Shared experts are a tensor-parallel dense MLP
// on the same N tokens, issued after the dispatch so that they run while it is in flight
// (Megatron-Core's shared-expert overlap); their partial sums join the same reduction.
//
// Uniform routing: every source rank sends C = floor(k f N / E) rows to every expert (f the
// capacity factor; dropless models have f = 1), so every local expert gets ep x C rows.
//
// With the experts' own tensor-parallel size etp != tp (Megatron-Core's parallel folding, Liu et
// al. 2025, arXiv 2504.14960), the MoE block runs as Megatron-Core's MoEAlltoAllTokenDispatcher
// does (megatron/core/transformer/moe/token_dispatcher.py, NVIDIA/Megatron-LM d98e8a6): no
// all-gather of the block input; each rank routes its own N / tp tokens (its sequence-parallel
// shard; the layout requires sequence parallelism with tp > 1), the all-to-all runs over the
// expert-parallel group (ep ranks strided by etp), then an all-gather over the experts'
// tensor-parallel group (etp consecutive ranks) gives each local expert ep x etp x C rows, whose
// columns split over etp; after the experts a reduce-scatter over the same group, the combine
// all-to-all, and the rank's own N / tp tokens come out. The shared experts stay a
// tensor-parallel MLP over tp (SharedExpertMLP): their own all-gather and reduce-scatter of the
// block's N tokens, beside the dispatch.
#pragma once

#include <cstdint>

#include "sim/spec/model_spec.h"
#include "sim/step/step_emitter.h"
#include "sim/step/transformer_layer.h"

namespace moesim {

struct MoeDims {
  std::int64_t tokens = 0;          // tokens routed on the rank: the tensor-parallel group's N (folded: N / tp)
  std::int64_t shared_tokens = 0;   // the shared experts' tokens: N
  std::int64_t hidden = 0;
  int experts = 0;                  // E
  int local_experts = 0;            // E / ep
  int top_k = 1;
  std::int64_t capacity = 0;        // C: rows per (source rank, expert)
  bool folded = false;              // etp != tp: the experts' own layout (above)
  int gathered = 1;                 // the experts' all-gather multiplies the rows (folded: etp)
  std::int64_t expert_ffn = 0;      // the activation's output width per rank (d_ffn / etp)
  std::int64_t expert_fc1_out = 0;  // fc1's output per rank (2x for gated)
  std::int64_t shared_ffn = 0;      // shared experts' activation width per rank (count x d_ffn / tp); 0 = none
  std::int64_t shared_fc1_out = 0;

  std::int64_t rows_sent() const { return static_cast<std::int64_t>(experts) * capacity; }
  std::int64_t rows_per_local_expert(int ep) const { return static_cast<std::int64_t>(ep) * gathered * capacity; }
  std::int64_t local_rows(int ep) const { return local_experts * rows_per_local_expert(ep); }
};

MoeDims moe_dims(const ModelSpec& model, const StepShape& shape);

class MoeMlp {
 public:
  MoeMlp(StepEmitter& emitter, const MoeDims& dims) : e_(emitter), d_(dims) {}

  // From the gathered block input to the partial sums the block's reduction adds (folded: from
  // the rank's shard of the block input to its shard of the output, no block collectives).
  void forward(Chain& chain, int layer, const std::string& prefix);
  bool folded() const { return d_.folded; }
  void backward(Chain& chain, int layer, BackwardPart part);

 private:
  TaskName name(int layer, Pass pass, const std::string& what, const std::string& stage) const {
    return TaskName{"L" + std::to_string(layer), layer, pass, what, stage};
  }
  // `to_experts`: the dispatch's direction (the forward dispatch, the combine's gradient).
  void all_to_all(Chain& chain, int layer, Pass pass, const std::string& what, bool to_experts,
                  const std::string& prefix);
  void shared_forward(Chain& chain, int layer, const std::string& prefix);
  // Folded layout: a collective of `rows` rows over the experts' tensor-parallel group, or of the
  // shared experts' tokens over the tensor-parallel group (tasks named <what>, report stage tp).
  void expert_tp_collective(Chain& chain, int layer, Pass pass, const std::string& what, CollectiveOp op,
                            std::int64_t rows, const std::string& prefix);
  void shared_tp_collective(Chain& chain, int layer, Pass pass, const std::string& what, CollectiveOp op,
                            const std::string& prefix);
  // FP8 (--precision fp8), before a GEMM of `what`: its input quantised, and in the step's first
  // microbatch its weights (cached for the others); in backward its output gradient.
  void fp8_input(Chain& chain, int layer, const std::string& what, std::int64_t weight_elems,
                 std::int64_t input_elems, const std::string& prefix);
  void fp8_grad(Chain& chain, int layer, const std::string& what, std::int64_t elems);
  struct FfnBackward {
    std::string what;             // "shared" or "experts": task names and the report's stage
    std::int64_t batch = 1;       // GEMMs per launch
    std::int64_t gemm_rows = 0;   // rows of each
    std::int64_t act_rows = 0;    // rows the activation's backward reads
    std::int64_t ffn = 0;         // fc2's input width
    std::int64_t fc1_out = 0;     // fc1's output width (2 ffn when gated)
  };
  void ffn_backward(Chain& chain, int layer, BackwardPart part, const FfnBackward& f);
  void shared_backward(Chain& chain, int layer, BackwardPart part);
  void experts_backward(Chain& chain, int layer, BackwardPart part);

  StepEmitter& e_;
  const MoeDims& d_;
};

}  // namespace moesim
