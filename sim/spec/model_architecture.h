// The whole network around the MoE layers (a model file's `architecture:` section): which layers
// are dense and which MoE, the attention (MHA, GQA, MLA), the dense MLP, embeddings, norms and
// multi-token prediction. Today it describes the model and counts its parameters (`moesim model`);
// the whole training step (sim/step) simulates every layer of it; the MoE-layer simulation
// (sim/build) runs the MoE layers of the file's top-level keys alone.
//
// Layer pattern: layers 0 .. dense_layers-1 are dense; after them every moe_interval-th layer is an
// MoE layer, starting with the first (layer dense_layers + j is MoE when j mod moe_interval = 0);
// the rest are dense. A model whose every layer is dense (dense_layers = num_layers) has no MoE
// layer and needs none of the MoE keys.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moesim {

enum class AttentionKind { kMha, kGqa, kMla };
std::string_view to_string(AttentionKind k);
std::optional<AttentionKind> parse_attention_kind(std::string_view s);
std::vector<std::string> attention_kind_names();

enum class NormKind { kLayerNorm, kRmsNorm };
std::string_view to_string(NormKind k);
std::optional<NormKind> parse_norm_kind(std::string_view s);
std::vector<std::string> norm_kind_names();

enum class PositionEmbedding { kRope, kLearned };
std::string_view to_string(PositionEmbedding p);
std::optional<PositionEmbedding> parse_position_embedding(std::string_view s);
std::vector<std::string> position_embedding_names();

struct AttentionSpec {
  AttentionKind kind = AttentionKind::kMha;
  int num_heads = 0;
  int num_kv_heads = 0;         // query groups; = num_heads for MHA; unused by MLA
  std::int64_t head_dim = 0;    // MHA / GQA; d_model / num_heads unless given
  bool qk_norm = false;         // an RMSNorm over every head's q and k (Qwen3)
  bool sinks = false;           // a learned sink logit per head (GPT-OSS)
  // MLA (DeepSeek-V2/V3): queries and keys/values through low-rank latents.
  std::int64_t q_lora_rank = 0;       // 0: queries projected from the hidden state directly
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;  // per-head q/k part without rotary embedding
  std::int64_t qk_rope_head_dim = 0;  // per-head q part with rotary embedding (k's is shared by heads)
  std::int64_t v_head_dim = 0;
};

struct ArchitectureSpec {
  bool present = false;            // the model file has an architecture section
  int dense_layers = 0;            // the first layers, with a dense MLP instead of the MoE layer
  int moe_interval = 1;            // after them, every moe_interval-th layer is MoE
  std::int64_t dense_d_ffn = 0;    // hidden size of the dense layers' MLP
  std::int64_t vocab_size = 0;
  bool tied_embeddings = false;    // the output head reuses the input embedding
  std::int64_t seq_len = 0;        // training sequence length
  PositionEmbedding positions = PositionEmbedding::kRope;  // learned: seq_len x d_model parameters
  NormKind norm = NormKind::kRmsNorm;
  bool linear_bias = false;        // biases on the attention, MLP, expert and router projections
  int mtp_depth = 0;               // multi-token prediction modules (DeepSeek-V3: 1)
  // Dropout probability of the attention probabilities and of the hidden states after attention,
  // MLP and embedding (Megatron-LM's --attention-dropout and --hidden-dropout, 0.1 by default and
  // in its GPT runs); 0 for models trained without (Llama 3, DeepSeek-V3, Mixtral, Qwen3). With
  // dropout the activations keep its 1-byte masks (sim/memory/activations.h).
  double dropout = 0;
  AttentionSpec attention;
};

}  // namespace moesim
