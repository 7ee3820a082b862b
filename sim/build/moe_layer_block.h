// The MoE layer as one block (block.h): gate -> route (softmax/top-k) -> encode into [E, C, M] ->
// per chunk: dispatch all-to-all -> FC1 -> activation -> FC2 -> combine all-to-all -> decode
// (MPipeMoE, reference section 1). Backward per chunk in the order of the MPipeMoE code:
// all-to-all of dGrad(T_DO) (bwd.combine) -> dM = dDO*W2^T (fc2.dgrad) -> activation backward ->
// wgrad W2 -> wgrad W1 -> dDI = dM*W1^T (fc1.dgrad) -> all-to-all back (bwd.dispatch); then encode
// backward and the router gradient (softmax/top-k backward, gate dgrad and wgrad).
//
// The block emits the stages; the policies it is given decide the rest: the ordering (issue order
// and streams of the all-to-alls, ordering.h), memory reuse S1-S4 (memory_reuse.h), activation
// checkpointing (checkpointing.h), tensor parallelism (tensor_parallel.h), shared experts
// (shared_experts.h) and gradient sync with ZeRO-1 (grad_sync.h).
//
// Work accounting (sizes in elements times the element size; R = the rows a rank receives, R/n
// per chunk; under imbalanced routing encode/decode scale with the rows the rank sends):
//   fwd.route   softmax + top-k over B x E: reads B*E logits, writes B*E probabilities plus B*k
//               scores and B*k indices (indices counted as one element each); 4 FLOP per logit.
//   fwd.encode  scatter T_I into the [E, C, M] dispatch tensor: reads B*M, writes E*C*M; 0 FLOP.
//   fwd.act     reads rows*fc1_out, writes rows*H; 1 FLOP per output element (memory bound).
//   fwd.decode  weighted gather: reads E*C*M + B*k scores (+ B*M of the shared experts' output),
//               writes B*M; 2*B*k*M FLOP.
//   bwd.decode  reads dY (B*M), T_O (E*C*M) and the scores (B*k); writes dT_O (E*C*M) and
//               dscores (B*k); 2*B*k*M FLOP for each of the two products.
//   bwd.act     reads dA (rows*H) and the saved FC1 output (rows*fc1_out); writes rows*fc1_out.
//   bwd.encode  gather-add of dT_DI back to tokens: reads E*C*M, writes B*M; 1 FLOP per read row
//               element.
//   bwd.route   softmax/top-k backward: reads B*E probabilities + B*k dscores, writes B*E; 4 FLOP
//               per logit.
//
// Data edges beyond the obvious producer -> consumer chain:
//   fwd.decode  <- route (the gate scores) and shared.fc2 (the shared experts' output is added).
//   bwd.route   <- bwd.decode (the scores' gradient is computed by decode's backward).
//   bwd.fc2.wgrad.c{i} <- bwd.combine.c{i} (needs dT_DO, not the activation gradient).
//   bwd.gate.dgrad <- bwd.encode and shared.fc1.dgrad: it accumulates into dT_I, which those wrote.
//   L{l}.bwd.decode <- L{l+1}.bwd.gate.dgrad, the last writer of layer l+1's input gradient.
//
// Buffers (`L{l}.<tensor>[.c{i}|.slot{s}]` on every simulated rank): model states (resident:
// params, grads, optimizer; layer_model_state_bytes). Activations saved for backward, freed
// together by bwd.gate.wgrad, the layer's last backward task: T_I (the stack's, block.h), T_O
// (R x M, the first fwd.combine), scores (B x E) and topk (B x k x 8 bytes) from fwd.route when
// run.count_routing_data, and T_DI, T_M, T_DO (memory_reuse.h). T_M is FC1's output (fc1_out
// wide), what the activation's backward needs; the activation's output is recomputed where needed
// and is not a graph buffer, as in the papers. Temporaries: dT_O (R x M: bwd.decode -> the last
// bwd.combine), dT_I (B x M: bwd.encode -> bwd.gate.wgrad in layer 0, else the last reader of the
// layer below), the chunk gradients (memory_reuse.h) and, for swiglu, bwd.dA.c{i} (R/n x H:
// bwd.fc2.dgrad -> bwd.act; relu / gelu compute the activation's gradient in place over dA).
#pragma once

#include <vector>

#include "sim/build/block.h"
#include "sim/build/checkpointing.h"
#include "sim/build/emitter.h"
#include "sim/build/grad_sync.h"
#include "sim/build/memory_reuse.h"
#include "sim/build/memory_sizes.h"
#include "sim/build/ordering.h"
#include "sim/build/shared_experts.h"
#include "sim/build/tensor_parallel.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim {

// The policies an MoE block applies, made once for the whole stack.
struct MoePolicies {
  const Ordering& ordering;
  TensorParallel& tensor_parallel;
  MemoryReuse& memory;
  Checkpointing& checkpointing;
  SharedExperts& shared_experts;
  GradientSync& grad_sync;
};

class MoeLayerBlock final : public Block {
 public:
  MoeLayerBlock(Emitter& emitter, const ModelSpec& model, const RunSpec& run, const MoePolicies& policies);

  Node forward(int layer, const Node& input, const Buf& in, const Buf& out) override;
  Gradient backward(int layer, const Gradient& upstream) override;

 private:
  struct ForwardPass;
  struct BackwardPass;

  // Forward stages (moe_layer_forward.cc).
  ForwardPass begin_forward(int layer, const Buf& in);
  void emit_router(ForwardPass& f, const Node& input, const Buf& in);
  void emit_forward_all_to_alls(ForwardPass& f);
  void emit_experts(ForwardPass& f);
  void bind_forward_chunk(const ForwardPass& f, int chunk, std::size_t g, const Node& act);
  Node emit_decode(ForwardPass& f, const Buf& in, const Buf& out);

  // Backward stages (moe_layer_backward.cc).
  BackwardPass begin_backward(int layer);
  void emit_backward_decode(BackwardPass& b, const Gradient& upstream, const Node& rerun_decode);
  void emit_backward_all_to_alls(BackwardPass& b);
  void emit_expert_backward(BackwardPass& b);
  void bind_backward_chunk(const BackwardPass& b, int chunk, std::size_t g, const Node& act);
  // Binds an expert weight (W1 or W2) of `layer` in its params or grads buffer to `task`.
  enum class Weight { kW1, kW2 };
  void bind_weight(int layer, Weight w, bool gradient, const Node& task, TaskGraph::Access access);
  Gradient emit_router_backward(BackwardPass& b);

  Emitter& e_;
  const RunSpec& run_;
  MoePolicies policies_;
  ModelStateBytes model_states_;      // of one layer on a rank (every layer has the same)
  ParamLayout param_layout_;          // the weights' places in params and grads
  std::vector<Buf> params_, grads_;   // per layer
  std::vector<Buf> t_i_;              // per layer: its input (the checkpoint of checkpointing)
  std::vector<std::vector<Buf>> saved_;  // per layer: activations freed by bwd.gate.wgrad
};

}  // namespace moesim
