#include "sim/spec/model_parameters.h"

#include <string>

#include "sim/core/checked_math.h"

namespace moesim {
namespace {

std::int64_t norm_params(const ModelSpec& m, std::int64_t width) {
  return m.architecture.norm == NormKind::kLayerNorm ? checked_mul(2, width) : width;
}

// One MLP (or expert) of hidden size ff: gated (swiglu) up and gate projections and a down
// projection, or up and down.
std::int64_t mlp_params(const ModelSpec& m, std::int64_t ff) {
  const bool gated = m.activation == Activation::kSwiglu;
  const std::int64_t up_width = gated ? checked_mul(2, ff) : ff;
  std::int64_t p = checked_mul({m.d_model, up_width}) + checked_mul(ff, m.d_model);
  if (m.architecture.linear_bias) p = checked_add(p, up_width + m.d_model);
  return p;
}

std::int64_t mla_params(const ModelSpec& m) {
  const AttentionSpec& a = m.architecture.attention;
  const std::int64_t d = m.d_model;
  const std::int64_t heads = a.num_heads;
  const std::int64_t q_head = a.qk_nope_head_dim + a.qk_rope_head_dim;
  std::int64_t p = 0;
  if (a.q_lora_rank > 0) {
    p = checked_mul(d, a.q_lora_rank) + norm_params(m, a.q_lora_rank) + checked_mul({a.q_lora_rank, heads, q_head});
  } else {
    p = checked_mul({d, heads, q_head});
  }
  p = checked_add(p, checked_mul(d, a.kv_lora_rank + a.qk_rope_head_dim));
  p = checked_add(p, norm_params(m, a.kv_lora_rank));
  p = checked_add(p, checked_mul({a.kv_lora_rank, heads, a.qk_nope_head_dim + a.v_head_dim}));
  return checked_add(p, checked_mul({heads, a.v_head_dim, d}));
}

std::int64_t grouped_attention_params(const ModelSpec& m) {
  const AttentionSpec& a = m.architecture.attention;
  const std::int64_t q_width = checked_mul(a.num_heads, a.head_dim);
  const std::int64_t kv_width = checked_mul(a.num_kv_heads, a.head_dim);
  std::int64_t p = checked_mul(m.d_model, q_width + 2 * kv_width) + checked_mul(q_width, m.d_model);
  if (m.architecture.linear_bias) p = checked_add(p, q_width + 2 * kv_width + m.d_model);
  if (a.qk_norm) p = checked_add(p, 2 * norm_params(m, a.head_dim));
  if (a.sinks) p = checked_add(p, a.num_heads);
  return p;
}

// What of one layer's attention every tensor-parallel rank holds whole (LayerParameters::tp_replicated).
std::int64_t attention_tp_replicated(const ModelSpec& m) {
  const AttentionSpec& a = m.architecture.attention;
  if (a.kind == AttentionKind::kMla) {
    std::int64_t p = checked_mul(m.d_model, a.kv_lora_rank + a.qk_rope_head_dim) + norm_params(m, a.kv_lora_rank);
    if (a.q_lora_rank > 0) p = checked_add(p, checked_mul(m.d_model, a.q_lora_rank) + norm_params(m, a.q_lora_rank));
    return p;
  }
  std::int64_t p = m.architecture.linear_bias ? m.d_model : 0;
  if (a.qk_norm) p = checked_add(p, 2 * norm_params(m, a.head_dim));
  return p;
}

// An MLP's down-projection bias, added after the row-parallel reduction.
std::int64_t mlp_tp_replicated(const ModelSpec& m) { return m.architecture.linear_bias ? m.d_model : 0; }

std::int64_t attention_params(const ModelSpec& m) {
  return m.architecture.attention.kind == AttentionKind::kMla ? mla_params(m) : grouped_attention_params(m);
}

std::int64_t router_params(const ModelSpec& m) {
  return checked_mul(m.d_model, m.num_experts) + (m.architecture.linear_bias ? m.num_experts : 0);
}

}  // namespace

LayerParameters layer_parameters(const ModelSpec& m, int layer) {
  LayerParameters p;
  p.attention = attention_params(m);
  p.tp_replicated = attention_tp_replicated(m);
  p.norms = 2 * norm_params(m, m.d_model);
  if (is_moe_layer(m, layer)) {
    p.routed_experts = checked_mul(m.num_experts, mlp_params(m, m.d_ffn));
    p.routed_tp_replicated = checked_mul(m.num_experts, mlp_tp_replicated(m));
    p.shared_experts = checked_mul(m.shared_experts.count, mlp_params(m, m.shared_experts.d_ffn));
    p.tp_replicated = checked_add(p.tp_replicated, checked_mul(m.shared_experts.count, mlp_tp_replicated(m)));
    p.router = router_params(m);
  } else {
    p.dense_mlp = mlp_params(m, m.architecture.dense_d_ffn);
    p.tp_replicated = checked_add(p.tp_replicated, mlp_tp_replicated(m));
  }
  return p;
}

LocalLayerParameters local_layer_parameters(const LayerParameters& p, int tp, int ep, int expert_tp) {
  const std::int64_t split = p.attention + p.dense_mlp + p.shared_experts - p.tp_replicated;
  const std::int64_t expert_split = p.routed_experts - p.routed_tp_replicated;
  LocalLayerParameters out;
  out.dense = split / tp + p.tp_replicated + p.norms + p.router;
  out.expert = (expert_split / expert_tp + p.routed_tp_replicated) / ep;
  return out;
}

std::int64_t model_norm_parameters(const ModelSpec& m) { return norm_params(m, m.d_model); }

std::int64_t mtp_extra_parameters(const ModelSpec& m) {
  return checked_mul({2, m.d_model, m.d_model}) + 3 * norm_params(m, m.d_model);
}

namespace {

// One multi-token prediction module (DeepSeek-V3): norms of the embedding and of the hidden state,
// a 2d -> d projection, one transformer layer of the last layer's kind and the norm before the
// shared output head.
std::int64_t mtp_module_params(const ModelSpec& m) {
  const LayerParameters l = layer_parameters(m, m.num_layers - 1);
  return checked_add(mtp_extra_parameters(m), l.attention + l.norms + l.dense_mlp + l.routed_experts +
                                                  l.shared_experts + l.router);
}

}  // namespace

bool is_moe_layer(const ModelSpec& model, int layer) {
  if (!model.has_moe_layers()) return false;
  if (!model.architecture.present) return true;
  const ArchitectureSpec& a = model.architecture;
  return layer >= a.dense_layers && (layer - a.dense_layers) % a.moe_interval == 0;
}

int count_moe_layers(const ModelSpec& model) {
  int n = 0;
  for (int l = 0; l < model.num_layers; ++l) n += is_moe_layer(model, l) ? 1 : 0;
  return n;
}

void require_moe_layers(const ModelSpec& model) {
  if (model.has_moe_layers()) return;
  throw InputError(model.origin, "model " + model.name + " has no MoE layer (every one of its " +
                                     std::to_string(model.num_layers) +
                                     " layers is dense); moesim simulates MoE layers, and `moesim model` describes "
                                     "this one");
}

void require_architecture(const ModelSpec& m) {
  if (!m.architecture.present)
    throw InputError(m.origin, "model " + m.name + " has no architecture section, so only its MoE layer is known "
                               "(docs/models.md says how to describe the whole network)");
}

ParameterCount count_parameters(const ModelSpec& m) {
  require_architecture(m);
  const ArchitectureSpec& a = m.architecture;
  ParameterCount c;
  c.moe_layers = count_moe_layers(m);
  c.dense_layers = m.num_layers - c.moe_layers;
  c.embedding = checked_mul(a.vocab_size, m.d_model);
  if (a.positions == PositionEmbedding::kLearned) c.positions = checked_mul(a.seq_len, m.d_model);
  c.output_head = a.tied_embeddings ? 0 : checked_mul(a.vocab_size, m.d_model);
  c.attention = checked_mul(m.num_layers, attention_params(m));
  c.norms = checked_mul(2 * m.num_layers + 1, norm_params(m, m.d_model));
  if (c.dense_layers > 0) c.dense_mlp = checked_mul(c.dense_layers, mlp_params(m, a.dense_d_ffn));
  if (c.moe_layers > 0) {
    c.routed_experts = checked_mul({c.moe_layers, m.num_experts, mlp_params(m, m.d_ffn)});
    c.active_routed = checked_mul({c.moe_layers, m.top_k, mlp_params(m, m.d_ffn)});
    c.shared_experts = checked_mul({c.moe_layers, m.shared_experts.count, mlp_params(m, m.shared_experts.d_ffn)});
    c.routers = checked_mul(c.moe_layers, router_params(m));
  }
  c.mtp = checked_mul(a.mtp_depth, mtp_module_params(m));
  return c;
}

std::int64_t ParameterCount::total() const {
  return embedding + positions + output_head + attention + dense_mlp + routed_experts + shared_experts + routers + norms;
}

std::int64_t ParameterCount::active() const {
  // With tied embeddings the token table is also the output head, which every token multiplies.
  const std::int64_t lookup_only = positions + (output_head == 0 ? 0 : embedding);
  return active_with_embedding() - lookup_only;
}

std::int64_t ParameterCount::active_with_embedding() const { return total() - routed_experts + active_routed; }

}  // namespace moesim
