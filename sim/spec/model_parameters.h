// Parameter counts of a model with an architecture section (sim/spec/model_architecture.h), per
// block, and the parameters one token's forward pass multiplies ("active").
//
// Conventions (docs/models.md): a gated MLP (swiglu) has three d x ff matrices, others two; an
// RMSNorm has d weights, a LayerNorm d weights and d biases; every layer has two norms and the
// model one final norm; with linear_bias every projection has its output bias. MLA follows
// DeepSeek-V3's weights: q down-projection and norm (when q_lora_rank > 0), q up-projection to
// heads x (nope + rope), kv down-projection to kv_lora_rank + rope (the shared rotary key), its
// norm, kv up-projection to heads x (nope + v), and the output projection.
//
// Active parameters exclude the input embedding (a table lookup, no multiplication; with tied
// embeddings the table stays, as the output head) and the routed experts a token does not visit
// (all but top_k); publications differ on the embedding, so active_with_embedding() is given too. Multi-token prediction modules are counted apart (mtp),
// outside total(), as DeepSeek-V3's report does; they share the embedding and output head.
#pragma once

#include <cstdint>

#include "sim/spec/model_spec.h"

namespace moesim {

struct ParameterCount {
  int dense_layers = 0;
  int moe_layers = 0;
  std::int64_t embedding = 0;       // the token embedding table
  std::int64_t positions = 0;       // learned position embeddings (0 with rotary embeddings)
  std::int64_t output_head = 0;     // 0 with tied embeddings
  std::int64_t attention = 0;       // every layer's attention, its norms (qk, MLA latents) and biases
  std::int64_t dense_mlp = 0;       // the dense layers' MLPs
  std::int64_t routed_experts = 0;  // every MoE layer's routed experts
  std::int64_t shared_experts = 0;
  std::int64_t routers = 0;
  std::int64_t norms = 0;           // the layers' two norms each, and the final norm
  std::int64_t active_routed = 0;   // the top_k routed experts of each MoE layer
  std::int64_t mtp = 0;             // multi-token prediction modules (not in total())

  std::int64_t total() const;
  std::int64_t active() const;
  std::int64_t active_with_embedding() const;
};

// Throws InputError (the model file) if the model has no architecture section.
void require_architecture(const ModelSpec& model);
ParameterCount count_parameters(const ModelSpec& model);

// One layer's parameters by part (its MLP is dense or MoE as the layer pattern says).
struct LayerParameters {
  std::int64_t attention = 0;  // projections, their biases and norms (qk, MLA latents), sinks
  std::int64_t norms = 0;      // the layer's two norms
  std::int64_t dense_mlp = 0;
  std::int64_t routed_experts = 0;
  std::int64_t shared_experts = 0;
  std::int64_t router = 0;
  // Of attention, dense_mlp and shared_experts: what every tensor-parallel rank holds whole, as
  // Megatron-LM places it: the row-parallel projections' output biases (added after the
  // reduction), qk norms, and MLA's down projections with their latent norms (sim/step/
  // transformer_layer.cc runs those replicated too).
  std::int64_t tp_replicated = 0;
  // Of routed_experts: the experts' down-projection biases, whole on each expert-tensor-parallel rank.
  std::int64_t routed_tp_replicated = 0;
};
LayerParameters layer_parameters(const ModelSpec& model, int layer);

// One GPU's share of a layer's parameters: `dense` (attention, norms, dense MLP, shared experts,
// router) under tensor parallelism tp, `expert` (the routed experts) split over ep expert-parallel
// and expert_tp expert-tensor-parallel ranks. Norms and the router are replicated.
struct LocalLayerParameters {
  std::int64_t dense = 0;
  std::int64_t expert = 0;
};
LocalLayerParameters local_layer_parameters(const LayerParameters& p, int tp, int ep, int expert_tp);
// The norm of width d_model (the model's final norm; an MTP module has three).
std::int64_t model_norm_parameters(const ModelSpec& model);
// An MTP module's parameters outside its transformer layer: the 2d x d projection and three norms.
std::int64_t mtp_extra_parameters(const ModelSpec& model);

// True when layer `layer` (0-based) is an MoE layer under the architecture's pattern (every layer
// without an architecture section).
bool is_moe_layer(const ModelSpec& model, int layer);
int count_moe_layers(const ModelSpec& model);

// Throws InputError (the model file) for a model without MoE layers: the step simulation, the
// planner, sweeps and the runtime run MoE layers.
void require_moe_layers(const ModelSpec& model);

}  // namespace moesim
