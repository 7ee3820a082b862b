// Model states per GPU by layout: the parameters each GPU of each stage holds and their bytes
// under ZeRO 0-3, on a small model counted by hand and on DeepSeek-V3 against its total.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "sim/memory/model_states.h"
#include "sim/spec/loader.h"
#include "sim/spec/model_parameters.h"
#include "tests/sim/spec/spec_test_util.h"

namespace moesim {
namespace {

using moesim::testing::input_error_of;
using ::testing::HasSubstr;

// d 8, 4 layers (the first dense, MLP 16), GQA 4 heads of 2 in 2 groups, 4 experts of 4 (gelu),
// top 1, vocabulary 10, untied, RMSNorm, bf16.
ModelSpec small_model() {
  ModelSpec m;
  m.name = "small";
  m.d_model = 8;
  m.d_ffn = 4;
  m.num_experts = 4;
  m.top_k = 1;
  m.dtype = DType::kBf16;
  m.activation = Activation::kGelu;
  m.num_layers = 4;
  m.architecture.present = true;
  m.architecture.dense_layers = 1;
  m.architecture.dense_d_ffn = 16;
  m.architecture.vocab_size = 10;
  m.architecture.seq_len = 16;
  m.architecture.attention = {.kind = AttentionKind::kGqa, .num_heads = 4, .num_kv_heads = 2, .head_dim = 2};
  return m;
}

TEST(ModelStates, SmallModelByHand) {
  // Attention 8x8 + 2 x 8x4 + 8x8 = 192; norms 16 per layer; dense MLP 2 x 8x16 = 256; an expert
  // 2 x 8x4 = 64; router 32; embedding and head 80 each; final norm 8.
  const TrainingLayout layout{.tp = 2, .pp = 2, .ep = 2, .dp = 3, .zero_stage = 0};
  const std::vector<StageModelStates> s = model_states_per_gpu(small_model(), layout);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].first_layer, 0);
  EXPECT_EQ(s[1].first_layer, 2);
  // Stage 0: layers 0 (dense) and 1 (MoE), the embedding. Attention, MLPs and the embedding / tp;
  // norms and router replicated; experts / (ep x tp).
  EXPECT_DOUBLE_EQ(s[0].dense_params, (2 * 192 + 256 + 80) / 2.0 + 2 * 16 + 32);
  EXPECT_DOUBLE_EQ(s[0].expert_params, 4 * 64 / 4.0);
  // Stage 1: two MoE layers, the final norm and the head.
  EXPECT_DOUBLE_EQ(s[1].dense_params, (2 * 192 + 80) / 2.0 + 2 * 16 + 2 * 32 + 8);
  EXPECT_DOUBLE_EQ(s[1].expert_params, 2 * 4 * 64 / 4.0);
  // Without ZeRO: bf16 weights, fp32 gradients, 12 bytes of Adam state, 18 bytes a parameter.
  const double p0 = s[0].dense_params + s[0].expert_params;
  EXPECT_DOUBLE_EQ(s[0].weight_bytes, 2 * p0);
  EXPECT_DOUBLE_EQ(s[0].grad_bytes, 4 * p0);
  EXPECT_DOUBLE_EQ(s[0].optimizer_bytes, 12 * p0);
}

TEST(ModelStates, ZeroStagesShardOverEachStatesReplicas) {
  const ModelSpec m = small_model();
  const std::vector<StageModelStates> none = model_states_per_gpu(m, {.tp = 1, .pp = 1, .ep = 2, .dp = 3});
  const double dense = none[0].dense_params, expert = none[0].expert_params;
  // Dense states are replicated over ep x dp = 6 GPUs, expert states over dp = 3.
  const auto check = [&](int zero, double weight_div_d, double weight_div_e, double grad_div_d, double grad_div_e,
                         double opt_div_d, double opt_div_e) {
    const StageModelStates s = model_states_per_gpu(m, {.tp = 1, .pp = 1, .ep = 2, .dp = 3, .zero_stage = zero})[0];
    EXPECT_DOUBLE_EQ(s.weight_bytes, 2 * (dense / weight_div_d + expert / weight_div_e)) << zero;
    EXPECT_DOUBLE_EQ(s.grad_bytes, 4 * (dense / grad_div_d + expert / grad_div_e)) << zero;
    EXPECT_DOUBLE_EQ(s.optimizer_bytes, 12 * (dense / opt_div_d + expert / opt_div_e)) << zero;
  };
  check(0, 1, 1, 1, 1, 1, 1);
  check(1, 1, 1, 1, 1, 6, 3);
  check(2, 1, 1, 6, 3, 6, 3);
  check(3, 6, 3, 6, 3, 6, 3);
}

TEST(ModelStates, OneGpuHoldsTheWholeModelAndMtp) {
  const ModelSpec m = load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/deepseek-v3.yaml");
  const StageModelStates s = model_states_per_gpu(m, {})[0];
  const ParameterCount c = count_parameters(m);
  EXPECT_NEAR(s.dense_params + s.expert_params, static_cast<double>(c.total() + c.mtp), 1.0);
  EXPECT_DOUBLE_EQ(s.bytes(), 18 * (s.dense_params + s.expert_params));
}

TEST(ModelStates, TiedEmbeddingsGiveTheLastStageACopy) {
  ModelSpec m = small_model();
  m.architecture.tied_embeddings = true;
  const std::vector<StageModelStates> one = model_states_per_gpu(m, {});
  const std::vector<StageModelStates> two = model_states_per_gpu(m, {.pp = 2});
  EXPECT_DOUBLE_EQ(two[0].dense_params + two[1].dense_params, one[0].dense_params + 80);
}

TEST(ModelStates, LayoutsTheModelDoesNotDivideAreRefused) {
  const ModelSpec m = small_model();
  EXPECT_THAT(input_error_of([&] { model_states_per_gpu(m, {.pp = 3}); }),
              HasSubstr("--pp 3 must divide the model's layers (4)"));
  EXPECT_THAT(input_error_of([&] { model_states_per_gpu(m, {.ep = 3}); }), HasSubstr("--ep 3 must divide the experts (4)"));
  EXPECT_THAT(input_error_of([&] { model_states_per_gpu(m, {.tp = 4}); }),
              HasSubstr("--tp 4 must divide the key/value groups (2)"));
  EXPECT_THAT(input_error_of([&] { model_states_per_gpu(m, {.zero_stage = 4}); }), HasSubstr("--zero must be 0, 1, 2 or 3"));
  ModelSpec layer_only = m;
  layer_only.architecture.present = false;
  EXPECT_THAT(input_error_of([&] { model_states_per_gpu(layer_only, {}); }), HasSubstr("no architecture section"));
}

}  // namespace
}  // namespace moesim
