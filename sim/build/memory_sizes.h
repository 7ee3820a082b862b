// Closed-form memory sizes used by the builder: model states of one MoE layer on one rank.
//
// Parameters per rank: the gate (E x M, replicated), the E_l local experts (M x fc1_out for FC1,
// H x M for FC2) and the shared experts; biases are not counted (MPipeMoE Eq. 1 has none). With
// tensor parallelism (DeepSpeed-TED, t = dims.tp_size) every rank holds a 1/t slice of each expert
// and of the shared experts; the gate stays whole (the router is replicated).
// fp32 training (the papers' accounting): 4 bytes each for parameters and gradients and 4 per
// optimizer state, so Adam gives 4 x parameters x 4 bytes (Eq. 1). Mixed precision (bf16/fp16
// dtype): 2 + 2 bytes for parameters and gradients, plus an fp32 master copy (4) and fp32 optimizer
// states: 16 bytes per parameter with Adam (ZeRO's accounting).
// ZeRO stage 1 shards the optimizer part (states and the master copy) over the data-parallel group
// that holds the same parameters: the experts' over the expert data-parallel group (dims.dp_size
// ranks), the gate's and the shared experts' over the non-expert one (ep x dp ranks), as TED does;
// a rank keeps ceil(bytes / group size) of each.
#pragma once

#include <cstdint>

#include "sim/build/layer_dims.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/types.h"

namespace moesim {

struct ModelStateBytes {
  std::int64_t parameters = 0;        // count on this rank, not bytes
  std::int64_t expert_parameters = 0;  // of which in the routed experts (the rest: gate, shared experts)
  std::int64_t param_bytes = 0;
  std::int64_t grad_bytes = 0;
  std::int64_t optimizer_bytes = 0;   // optimizer states plus the fp32 master copy in mixed precision
  int grad_element_bytes = 4;         // bytes per gradient element (what the gradient all-reduces move)
  std::int64_t total() const { return param_bytes + grad_bytes + optimizer_bytes; }
  std::int64_t expert_grad_bytes() const { return expert_parameters * grad_element_bytes; }
  std::int64_t dense_grad_bytes() const { return (parameters - expert_parameters) * grad_element_bytes; }
};

ModelStateBytes layer_model_state_bytes(const ModelSpec& model, const LayerDims& dims, Optimizer optimizer,
                                        int zero_stage = 0);

// Where each weight lies in a layer's `params` buffer (and its gradient in `grads`), in bytes from
// the start, packed in the storage type in this order: the gate (M x E), the local experts' W1
// (E_l x M x F/t) and W2 (E_l x H/t x M), the shared experts' W1 (M x Fs) and W2 (Hs x M), Fs and
// Hs their widths on the rank; `end` is where the shared experts' W2 ends: param_bytes above when
// `shared_ffn` is their Hs (the block checks it). The builder binds the expert GEMMs' weights
// there and the runtime lays its parameters out so.
struct ParamLayout {
  std::int64_t gate = 0, w1 = 0, w2 = 0, shared_w1 = 0, shared_w2 = 0, end = 0;
};
ParamLayout param_layout(const LayerDims& dims, std::int64_t shared_fc1_out, std::int64_t shared_ffn);

}  // namespace moesim
