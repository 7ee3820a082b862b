// Parameter counts of whole-network model descriptions: the formulas on small models counted by
// hand, the layer pattern, and every bundled preset against the counts its publication gives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "sim/spec/loader.h"
#include "sim/spec/model_parameters.h"
#include "sim/spec/presets.h"
#include "tests/sim/spec/spec_test_util.h"

namespace moesim {
namespace {

using moesim::testing::input_error_of;
using moesim::testing::tiny_mla;
using ::testing::HasSubstr;

// d 8, 2 layers, GQA 4 heads of 2 in 2 groups, every layer MoE: 4 experts of ff 3 (swiglu), top 2,
// vocabulary 10, untied, RMSNorm.
ModelSpec tiny_gqa() {
  ModelSpec m;
  m.name = "tiny";
  m.d_model = 8;
  m.d_ffn = 3;
  m.num_experts = 4;
  m.top_k = 2;
  m.activation = Activation::kSwiglu;
  m.num_layers = 2;
  m.architecture.present = true;
  m.architecture.vocab_size = 10;
  m.architecture.seq_len = 16;
  m.architecture.attention = {.kind = AttentionKind::kGqa, .num_heads = 4, .num_kv_heads = 2, .head_dim = 2};
  return m;
}

TEST(ModelParameters, GroupedQueryAttentionMoeModelByHand) {
  const ParameterCount c = count_parameters(tiny_gqa());
  // q 8x8, k and v 8x4 each, o 8x8 = 192 per layer.
  EXPECT_EQ(c.attention, 2 * 192);
  // An expert: up+gate 8x6, down 3x8 = 72; 4 of them per layer.
  EXPECT_EQ(c.routed_experts, 2 * 4 * 72);
  EXPECT_EQ(c.active_routed, 2 * 2 * 72);
  EXPECT_EQ(c.routers, 2 * 8 * 4);
  EXPECT_EQ(c.norms, (2 * 2 + 1) * 8);
  EXPECT_EQ(c.embedding, 80);
  EXPECT_EQ(c.output_head, 80);
  const std::int64_t total = 80 + 80 + 384 + 576 + 64 + 40;
  EXPECT_EQ(c.total(), total);
  EXPECT_EQ(c.active_with_embedding(), total - 576 + 288);
  EXPECT_EQ(c.active(), total - 576 + 288 - 80);
  EXPECT_EQ(c.mtp, 0);
}

TEST(ModelParameters, BiasesNormsAndSinksByHand) {
  ModelSpec m = tiny_gqa();
  m.architecture.linear_bias = true;
  m.architecture.norm = NormKind::kLayerNorm;
  m.architecture.attention.qk_norm = true;
  m.architecture.attention.sinks = true;
  const ParameterCount c = count_parameters(m);
  // + biases q 8, k 4, v 4, o 8; q/k LayerNorms 2 x (2 + 2); one sink per head (4).
  EXPECT_EQ(c.attention, 2 * (192 + 24 + 8 + 4));
  // Expert biases: up+gate 6, down 8.
  EXPECT_EQ(c.routed_experts, 2 * 4 * (72 + 14));
  EXPECT_EQ(c.routers, 2 * (32 + 4));
  EXPECT_EQ(c.norms, 5 * 16);
}

TEST(ModelParameters, MultiHeadLatentAttentionByHand) {
  ModelSpec m = tiny_gqa();
  m.architecture.attention = tiny_mla();
  const ParameterCount c = count_parameters(m);
  // q: 8x4 + norm 4 + 4x(2 x 3); kv: 8x(3 + 1) + norm 3 + 3x(2 x 4); o: (2 x 2)x8.
  const std::int64_t per_layer = (32 + 4 + 24) + (32 + 3 + 24) + 32;
  EXPECT_EQ(c.attention, 2 * per_layer);
  m.architecture.attention.q_lora_rank = 0;  // queries straight from the hidden state: 8 x (2 x 3)
  EXPECT_EQ(count_parameters(m).attention, 2 * (48 + 59 + 32));
}

// One GPU's share under tensor parallelism: Megatron-LM splits the column-parallel projections
// with their biases and the row-parallel ones without theirs (added after the reduction); norms,
// qk norms, the router and MLA's down projections stay whole on every rank.
TEST(ModelParameters, LocalShareKeepsRowParallelBiasesAndNormsWhole) {
  ModelSpec m = tiny_gqa();
  m.architecture.linear_bias = true;
  m.architecture.norm = NormKind::kLayerNorm;
  m.architecture.attention.qk_norm = true;
  const LayerParameters p = layer_parameters(m, 0);
  // o bias 8 + qk LayerNorms 2 x 4; experts: down bias 8 each.
  EXPECT_EQ(p.tp_replicated, 8 + 8);
  EXPECT_EQ(p.routed_tp_replicated, 4 * 8);
  // tp 2: attention 192 weights + 16 column biases split, 16 whole; 2 LayerNorms of 16; router 36.
  const LocalLayerParameters two = local_layer_parameters(p, 2, 2, 2);
  EXPECT_EQ(two.dense, (192 + 16) / 2 + 16 + 32 + 36);
  // Experts over ep 2 and expert tp 2: each keeps its down bias (8) whole, splits 72 + 6.
  EXPECT_EQ(two.expert, 4 * ((72 + 6) / 2 + 8) / 2);
  // tp 1 keeps everything.
  const LocalLayerParameters one = local_layer_parameters(p, 1, 1, 1);
  EXPECT_EQ(one.dense, p.attention + p.norms + p.router);
  EXPECT_EQ(one.expert, p.routed_experts);

  m.architecture.attention = tiny_mla();
  m.architecture.norm = NormKind::kRmsNorm;
  const LayerParameters mla = layer_parameters(m, 0);
  // q down 8x4 + its norm 4, kv down 8x(3 + 1) + its norm 3; the experts' down biases.
  EXPECT_EQ(mla.tp_replicated, 36 + 35);
  EXPECT_EQ(local_layer_parameters(mla, 2, 1, 2).dense, (mla.attention - 71) / 2 + 71 + 16 + 36);
}

TEST(ModelParameters, LayerPatternDenseFirstThenEveryMthLayer) {
  ModelSpec m = tiny_gqa();
  m.num_layers = 10;
  m.architecture.dense_layers = 3;
  m.architecture.moe_interval = 2;
  m.architecture.dense_d_ffn = 5;
  std::string pattern;
  for (int l = 0; l < m.num_layers; ++l) pattern += is_moe_layer(m, l) ? 'M' : 'd';
  EXPECT_EQ(pattern, "dddMdMdMdM");
  const ParameterCount c = count_parameters(m);
  EXPECT_EQ(c.moe_layers, 4);
  EXPECT_EQ(c.dense_layers, 6);
  EXPECT_EQ(c.dense_mlp, 6 * (8 * 10 + 5 * 8));  // gated: up+gate 8x10, down 5x8
}

TEST(ModelParameters, TiedEmbeddingsStayActiveAsTheHeadAndLearnedPositionsDoNot) {
  ModelSpec m = tiny_gqa();
  m.architecture.tied_embeddings = true;
  m.architecture.positions = PositionEmbedding::kLearned;
  const ParameterCount c = count_parameters(m);
  EXPECT_EQ(c.output_head, 0);
  EXPECT_EQ(c.positions, 16 * 8);
  EXPECT_EQ(c.active_with_embedding(), c.total() - c.routed_experts + c.active_routed);
  EXPECT_EQ(c.active(), c.active_with_embedding() - c.positions);  // the table is the head
}

TEST(ModelParameters, MultiTokenPredictionIsCountedApart) {
  ModelSpec m = tiny_gqa();
  const std::int64_t total = count_parameters(m).total();
  m.architecture.mtp_depth = 2;
  const ParameterCount c = count_parameters(m);
  EXPECT_EQ(c.total(), total);
  // Per module: 2d x d projection, three norms, a layer's attention, two norms and MoE layer.
  EXPECT_EQ(c.mtp, 2 * (128 + 3 * 8 + 192 + 2 * 8 + (4 * 72 + 32)));
}

TEST(ModelParameters, ALayerOnlyModelHasNoCountAndADenseModelIsNoMoeModel) {
  ModelSpec m = tiny_gqa();
  m.architecture.present = false;
  EXPECT_THAT(input_error_of([&] { count_parameters(m); }), HasSubstr("no architecture section"));
  ModelSpec dense = tiny_gqa();
  dense.num_experts = 0;
  EXPECT_THAT(input_error_of([&] { require_moe_layers(dense); }), HasSubstr("has no MoE layer"));
  EXPECT_NO_THROW(require_moe_layers(tiny_gqa()));
}

// Half a unit of the last significant digit of a published figure ("46.7B": 0.05B), the rounding
// the figure itself carries.
double rounding_of(double published) {
  for (int digits = 1; digits <= 15; ++digits) {
    const double unit = std::pow(10.0, std::floor(std::log10(published)) - digits + 1);
    if (std::abs(std::round(published / unit) * unit - published) <= 1e-9 * published) return unit / 2;
  }
  return 0;
}

TEST(ModelParameters, RoundingOfPublishedFigures) {
  EXPECT_NEAR(rounding_of(46.7e9), 0.05e9, 1);
  EXPECT_NEAR(rounding_of(22e9), 0.5e9, 1);
  EXPECT_NEAR(rounding_of(116.83e9), 0.005e9, 1);
}

// Every preset that carries published counts matches them within the figure's own rounding plus
// 0.5% (conventions the publications do not state: which norms and biases they count).
TEST(ModelParameters, EveryPresetMatchesItsPublishedCounts) {
  int checked = 0;
  for (const PresetInfo& p : list_presets(MOESIM_SOURCE_DIR, PresetKind::kModel)) {
    const ModelSpec m = load_model_spec(p.path);
    if (!m.published) continue;
    const ParameterCount c = count_parameters(m);
    const auto near = [&](double computed, double published, const char* what) {
      EXPECT_LE(std::abs(computed - published), rounding_of(published) + 0.005 * published)
          << p.name << " " << what << ": " << computed << " computed, " << published << " published";
    };
    near(static_cast<double>(c.total()), m.published->total, "total");
    if (m.published->active > 0)
      near(static_cast<double>(m.published->active_counts_embedding ? c.active_with_embedding() : c.active()),
           m.published->active, "active");
    ++checked;
  }
  EXPECT_GE(checked, 19);  // 7 MoE and dense LLMs, 12 dense GPTs of the Megatron papers
}

}  // namespace
}  // namespace moesim
