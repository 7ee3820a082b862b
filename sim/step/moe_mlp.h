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
#pragma once

#include <cstdint>

#include "sim/spec/model_spec.h"
#include "sim/step/moe_dispatcher.h"
#include "sim/step/step_emitter.h"
#include "sim/step/transformer_layer.h"

namespace moesim {

struct MoeDims {
  std::int64_t tokens = 0;          // N: the tensor-parallel group's tokens of the microbatch
  std::int64_t hidden = 0;
  int experts = 0;                  // E
  int local_experts = 0;            // E / ep
  int top_k = 1;
  std::int64_t capacity = 0;        // C: rows per (source rank, expert)
  std::int64_t expert_ffn = 0;      // the activation's output width per rank (d_ffn / tp)
  std::int64_t expert_fc1_out = 0;  // fc1's output per rank (2x for gated)
  std::int64_t shared_ffn = 0;      // shared experts' activation width per rank (count x d_ffn / tp); 0 = none
  std::int64_t shared_fc1_out = 0;

  std::int64_t rows_sent() const { return static_cast<std::int64_t>(experts) * capacity; }
  std::int64_t rows_per_local_expert(int ep) const { return static_cast<std::int64_t>(ep) * capacity; }
};

MoeDims moe_dims(const ModelSpec& model, const StepShape& shape);

class MoeMlp {
 public:
  MoeMlp(StepEmitter& emitter, const MoeDims& dims) : e_(emitter), d_(dims), dispatcher_(emitter, dims) {}

  // From the gathered block input to the partial sums the block's reduction adds.
  void forward(Chain& chain, int layer, const std::string& prefix);
  void backward(Chain& chain, int layer, BackwardPart part);

 private:
  TaskName name(int layer, Pass pass, const std::string& what, const std::string& stage) const {
    return TaskName{"L" + std::to_string(layer), layer, pass, what, stage};
  }
  // `to_experts`: the dispatch's direction (the forward dispatch, the combine's gradient).
  void all_to_all(Chain& chain, int layer, Pass pass, const std::string& what, bool to_experts,
                  const std::string& prefix);
  void shared_forward(Chain& chain, int layer, const std::string& prefix);
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
  MoeDispatcher dispatcher_;  // the all-to-all dispatcher's metadata, probabilities and sorts
};

}  // namespace moesim
