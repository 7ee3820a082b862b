#include "sim/spec/model_flops.h"

#include "sim/spec/model_parameters.h"

namespace moesim {
namespace {

// Forward + backward (3) times a multiply-add (2).
constexpr double kTrainGemm = 6.0;

double mla_attention(const ModelSpec& m) {
  const AttentionSpec& a = m.architecture.attention;
  const double h = static_cast<double>(m.d_model);
  const double s = static_cast<double>(m.architecture.seq_len);
  const double heads = a.num_heads;
  const double qk = static_cast<double>(a.qk_nope_head_dim + a.qk_rope_head_dim);
  const double v = static_cast<double>(a.v_head_dim);
  const double q_term = a.q_lora_rank > 0 ? static_cast<double>(a.q_lora_rank) * (h + heads * qk + 1) : h * heads * qk;
  const double kv_term = static_cast<double>(a.kv_lora_rank) *
                             (h + heads * (static_cast<double>(a.qk_nope_head_dim) + v) + 1) +
                         h * static_cast<double>(a.qk_rope_head_dim);
  const double core = s * heads * qk / 2 + s * heads * v / 2;
  return kTrainGemm * (q_term + kv_term + heads * v * h + core);
}

double grouped_attention(const ModelSpec& m) {
  const AttentionSpec& a = m.architecture.attention;
  const double h = static_cast<double>(m.d_model);
  const double s = static_cast<double>(m.architecture.seq_len);
  const double q = static_cast<double>(a.num_heads) * static_cast<double>(a.head_dim);
  const double kv = static_cast<double>(a.num_kv_heads) * static_cast<double>(a.head_dim);
  return kTrainGemm * (h * (q + 2 * kv) + q * s + q * h);
}

}  // namespace

TrainingFlops megatron_training_flops_per_token(const ModelSpec& m) {
  const ParameterCount counts = count_parameters(m);  // the layer pattern; refuses a model without architecture
  const ArchitectureSpec& a = m.architecture;
  const double h = static_cast<double>(m.d_model);
  const double gated = m.activation == Activation::kSwiglu ? 3 : 2;
  const bool last_is_moe = is_moe_layer(m, m.num_layers - 1);
  const double moe_layers = counts.moe_layers + (last_is_moe ? a.mtp_depth : 0);
  const double dense_layers = counts.dense_layers + (last_is_moe ? 0 : a.mtp_depth);
  const double layers = m.num_layers + a.mtp_depth;

  TrainingFlops f;
  const double expert_width = static_cast<double>(m.d_ffn) * m.top_k +
                              static_cast<double>(m.shared_experts.d_ffn) * m.shared_experts.count;
  f.mlp = kTrainGemm * h * gated * (static_cast<double>(a.dense_d_ffn) * dense_layers + expert_width * moe_layers);
  f.attention = layers * (a.attention.kind == AttentionKind::kMla ? mla_attention(m) : grouped_attention(m));
  f.logits = kTrainGemm * h * static_cast<double>(a.vocab_size) * (1 + a.mtp_depth);
  f.mtp = kTrainGemm * a.mtp_depth * (3 * h + 2 * h * h);
  return f;
}

}  // namespace moesim
