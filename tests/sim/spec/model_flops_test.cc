// Training FLOPs per token by Megatron-LM's formula: its closed form for dense GPTs, and the
// MoE, GQA, MLA and MTP terms on small models counted by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/spec/loader.h"
#include "sim/spec/model_flops.h"
#include "tests/sim/spec/spec_test_util.h"

namespace moesim {
namespace {

ModelSpec dense_gpt(std::int64_t h, int layers, std::int64_t s, std::int64_t vocab) {
  ModelSpec m;
  m.name = "gpt";
  m.d_model = h;
  m.activation = Activation::kGelu;
  m.num_layers = layers;
  m.architecture.present = true;
  m.architecture.dense_layers = layers;
  m.architecture.dense_d_ffn = 4 * h;
  m.architecture.vocab_size = vocab;
  m.architecture.seq_len = s;
  m.architecture.attention = {.kind = AttentionKind::kMha, .num_heads = 8, .num_kv_heads = 8, .head_dim = h / 8};
  return m;
}

// Narayanan et al. (SC21) count 72 B s l h^2 (1 + s / 6h) + 6 B s h V without recomputation; the
// Megatron-Core formula halves the s x s products for the causal mask: s / 12h.
TEST(ModelFlops, DenseGptIsTheClosedFormWithTheCausalHalf) {
  for (const auto& [h, l, s, v] : {std::tuple{64, 2, 128, 1000}, std::tuple{12288, 96, 2048, 51200}}) {
    const ModelSpec m = dense_gpt(h, l, s, v);
    const double hd = h, ld = l, sd = s, vd = v;
    const double expected = 72 * ld * hd * hd * (1 + sd / (12 * hd)) + 6 * hd * vd;
    EXPECT_NEAR(megatron_training_flops_per_token(m).total(), expected, 1e-9 * expected) << h;
  }
}

TEST(ModelFlops, MoeLayersCountTopKAndSharedExpertsAndGqaItsGroups) {
  ModelSpec m = dense_gpt(16, 4, 32, 100);
  m.activation = Activation::kSwiglu;
  m.architecture.dense_layers = 1;
  m.architecture.dense_d_ffn = 40;
  m.d_ffn = 8;
  m.num_experts = 16;
  m.top_k = 2;
  m.shared_experts = {.count = 1, .d_ffn = 12};
  m.architecture.attention = {.kind = AttentionKind::kGqa, .num_heads = 4, .num_kv_heads = 2, .head_dim = 4};
  const TrainingFlops f = megatron_training_flops_per_token(m);
  // 1 dense layer of 40, 3 MoE layers of 2 x 8 + 12; gated: 3 matrices.
  EXPECT_DOUBLE_EQ(f.mlp, 6.0 * 16 * 3 * (40 * 1 + (2 * 8 + 12) * 3));
  // q = 16, kv = 8: h (q + 2 kv) + q s + q h per layer.
  EXPECT_DOUBLE_EQ(f.attention, 4 * 6.0 * (16 * 32 + 16 * 32 + 16 * 16));
  EXPECT_DOUBLE_EQ(f.logits, 6.0 * 16 * 100);
  EXPECT_DOUBLE_EQ(f.mtp, 0);
}

TEST(ModelFlops, MlaTermsAndMtpModules) {
  ModelSpec m = dense_gpt(16, 2, 32, 100);
  m.architecture.attention = testing::tiny_mla();
  const double q_term = 4 * (16 + 2 * 3 + 1);
  const double kv_term = 3 * (16 + 2 * (2 + 2) + 1) + 16 * 1;
  const double core = 32 * 2 * 3 / 2.0 + 32 * 2 * 2 / 2.0;
  const double per_layer = 6 * (q_term + kv_term + 2 * 2 * 16 + core);
  EXPECT_DOUBLE_EQ(megatron_training_flops_per_token(m).attention, 2 * per_layer);
  const double mlp = megatron_training_flops_per_token(m).mlp;
  m.architecture.mtp_depth = 1;  // one more (dense, like the last) layer, a logit and 3h + 2h^2
  const TrainingFlops f = megatron_training_flops_per_token(m);
  EXPECT_DOUBLE_EQ(f.attention, 3 * per_layer);
  EXPECT_DOUBLE_EQ(f.mlp, mlp * 3 / 2);
  EXPECT_DOUBLE_EQ(f.logits, 2 * 6.0 * 16 * 100);
  EXPECT_DOUBLE_EQ(f.mtp, 6.0 * (3 * 16 + 2 * 16 * 16));
}

TEST(ModelFlops, NeedsTheArchitecture) {
  ModelSpec m = dense_gpt(16, 2, 32, 100);
  m.architecture.present = false;
  EXPECT_THAT(moesim::testing::input_error_of([&] { megatron_training_flops_per_token(m); }),
              ::testing::HasSubstr("no architecture section"));
}

}  // namespace
}  // namespace moesim
