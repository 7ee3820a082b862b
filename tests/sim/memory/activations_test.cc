// Activation memory per layer and per pipeline stage (sim/memory/activations.h): Korthikanti et
// al.'s formulas (arXiv:2205.05198) on the GPT presets at their Table 3 settings, and numbers
// derived by hand, tensor by tensor, for Llama 3 70B (GQA, SwiGLU, flash) and DeepSeek-V3 (MLA, MoE).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/memory/activations.h"
#include "sim/spec/loader.h"
#include "tests/sim/spec/spec_test_util.h"

namespace moesim {
namespace {

using moesim::testing::input_error_of;
using ::testing::HasSubstr;

ModelSpec preset(const std::string& name) {
  return load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/" + name + ".yaml");
}

// Korthikanti et al., Table 3: tensor parallel 8 throughout, sequence 2048; micro-batch 4 for
// 22B (one stage), 1 for the others on 8, 35 and 64 pipeline stages.
struct Table3Row {
  const char* model;
  std::int64_t micro_batch;
  int pipeline;
};
constexpr Table3Row kTable3[] = {{"gpt-22b", 4, 1}, {"gpt-175b", 1, 8}, {"gpt-530b", 1, 35}, {"gpt-1t", 1, 64}};

// The paper's symbols for one preset.
struct Symbols {
  std::int64_t s, b, h, a, t = 8;
  std::int64_t sbh() const { return s * b * h; }
  std::int64_t as2b() const { return a * s * s * b; }
};

Symbols symbols(const ModelSpec& m, const Table3Row& row) {
  return {m.architecture.seq_len, row.micro_batch, m.d_model, m.architecture.attention.num_heads};
}

ActivationLayout unfused(std::int64_t b, int tp, bool sp, Recompute r = Recompute::kNone) {
  return {.micro_batch = b, .tp = tp, .sequence_parallel = sp, .recompute = r, .attention = AttentionKernel::kUnfused,
          .moe_strategy = MemoryStrategy::kNone, .modules = {}};
}

TEST(Activations, KorthikantiPerLayerFormulasOnTable3Gpts) {
  for (const Table3Row& row : kTable3) {
    SCOPED_TRACE(row.model);
    const ModelSpec m = preset(row.model);
    const Symbols x = symbols(m, row);
    // Section 4.1, no parallelism: sbh (34 + 5as/h).
    const LayerActivations one = dense_layer_activations(m, unfused(x.b, 1, false));
    EXPECT_EQ(one.kept_bytes, 34 * x.sbh() + 5 * x.as2b());
    EXPECT_EQ(one.recompute_bytes, 0);
    // Section 4.2.1, tensor parallelism: sbh (10 + 24/t + 5as/(ht)).
    EXPECT_EQ(dense_layer_activations(m, unfused(x.b, 8, false)).kept_bytes,
              10 * x.sbh() + 24 * x.sbh() / x.t + 5 * x.as2b() / x.t);
    // Section 4.2.2, tensor and sequence parallelism: sbh/t (34 + 5as/h).
    EXPECT_EQ(dense_layer_activations(m, unfused(x.b, 8, true)).kept_bytes, (34 * x.sbh() + 5 * x.as2b()) / x.t);
    // Section 5, selective recomputation: 34 sbh/t; the attention core's 5as^2b/t is re-created.
    const LayerActivations selective = dense_layer_activations(m, unfused(x.b, 8, true, Recompute::kSelective));
    EXPECT_EQ(selective.kept_bytes, 34 * x.sbh() / x.t);
    EXPECT_EQ(selective.recompute_bytes, 5 * x.as2b() / x.t);
    // Full recomputation keeps the layer's input: 2sbh, 2sbh/t with sequence parallelism.
    const LayerActivations full = dense_layer_activations(m, unfused(x.b, 8, false, Recompute::kFull));
    EXPECT_EQ(full.kept_bytes, 2 * x.sbh());
    EXPECT_EQ(full.kept_bytes + full.recompute_bytes, dense_layer_activations(m, unfused(x.b, 8, false)).kept_bytes);
    EXPECT_EQ(dense_layer_activations(m, unfused(x.b, 8, true, Recompute::kFull)).kept_bytes, 2 * x.sbh() / x.t);
  }
}

TEST(Activations, KorthikantiEmbeddingAndOutputTerms) {
  const ModelSpec m = preset("gpt-175b");
  const Symbols x = symbols(m, kTable3[1]);
  const std::int64_t v = m.architecture.vocab_size;
  // Section 4.3 with sequence parallelism: the embedding dropout's mask sbh/t (plus the int64 token
  // ids Megatron-LM's formula counts, 8sb); the output side 4sbh/t (1 + v/h).
  EXPECT_EQ(embedding_activations(m, unfused(1, 8, true)), x.sbh() / x.t + 8 * x.s * x.b);
  EXPECT_EQ(output_activations(m, unfused(1, 8, true)), 4 * x.sbh() / x.t + 4 * x.s * x.b * v / x.t);
}

TEST(Activations, WithoutDropoutTheMasksGo) {
  ModelSpec m = preset("gpt-175b");
  m.architecture.dropout = 0;
  const Symbols x = symbols(m, kTable3[1]);
  // Of the 34: the two 1-byte hidden masks; of the 5as^2b: the attention mask (1) and the
  // dropout's output (2), the GEMM with V reading the softmax output itself.
  EXPECT_EQ(dense_layer_activations(m, unfused(1, 1, false)).kept_bytes, 32 * x.sbh() + 2 * x.as2b());
  EXPECT_EQ(embedding_activations(m, unfused(1, 1, false)), 8 * x.s * x.b);
}

TEST(Activations, Fp32ElementsWithOneByteMasks) {
  ModelSpec m = preset("gpt-175b");
  m.dtype = DType::kFp32;
  const Symbols x = symbols(m, kTable3[1]);
  // 16 d_model-wide elements per token at 4 bytes plus the two masks; softmax and dropout outputs
  // at 4 bytes, the attention mask at 1.
  EXPECT_EQ(dense_layer_activations(m, unfused(1, 1, false)).kept_bytes, 66 * x.sbh() + 9 * x.as2b());
}

TEST(Activations, KorthikantiStageTotalsOnOneFOneBAndInterleaved) {
  for (const Table3Row& row : kTable3) {
    SCOPED_TRACE(row.model);
    const ModelSpec m = preset(row.model);
    const Symbols x = symbols(m, row);
    const ActivationLayout l = unfused(x.b, 8, true, Recompute::kSelective);
    const int p = row.pipeline;
    const PipelineLayout pipe{.schedule = PipelineSchedule::kOneFOneB, .stages = p, .microbatches = 4 * p, .part_layers = {}};
    // Sections 4.2.3 and 4.3: the first stage holds p microbatches of L/p layers, L layers' worth
    // whatever p, plus the embedding's p times; with one stage it is also the last.
    const StageActivations first = stage_activations(m, l, 1, pipe, 0);
    std::int64_t expected = m.num_layers * (34 * x.sbh() / x.t) + p * embedding_activations(m, l);
    if (p == 1) expected += output_activations(m, l);
    EXPECT_EQ(first.in_flight, p);
    EXPECT_EQ(first.kept_bytes, expected);
    EXPECT_EQ(first.recompute_bytes, 5 * x.as2b() / x.t);
    // The last stage holds one microbatch.
    const StageActivations last = stage_activations(m, l, 1, pipe, p - 1);
    EXPECT_EQ(last.in_flight, 1);
    if (p > 1) {
      EXPECT_EQ(last.kept_bytes, m.num_layers / p * (34 * x.sbh() / x.t) + output_activations(m, l));
    }
  }
}

TEST(Activations, InterleavedFirstStageHasKorthikantisFactor) {
  // GPT-175B, p 8, v 2: L (1 + (p-1)/(pv)) = 96 x 23/16 = 138 layers' worth, in 23 passes of
  // 6-layer chunks; chunk 0 (with the embedding) runs passes 0-7 and 16-22.
  const ModelSpec m = preset("gpt-175b");
  const ActivationLayout l = unfused(1, 8, true, Recompute::kSelective);
  const PipelineLayout pipe{.schedule = PipelineSchedule::kInterleaved, .stages = 8, .virtual_stages = 2, .microbatches = 64, .part_layers = {}};
  const StageActivations s = stage_activations(m, l, 1, pipe, 0);
  EXPECT_EQ(s.in_flight, 23);
  EXPECT_EQ(s.kept_bytes, 138 * dense_layer_activations(m, l).kept_bytes + 15 * embedding_activations(m, l));
}

TEST(Activations, GpipeHoldsEveryMicrobatch) {
  const ModelSpec m = preset("gpt-175b");
  const ActivationLayout l = unfused(1, 8, true, Recompute::kFull);
  const PipelineLayout pipe{.schedule = PipelineSchedule::kGpipe, .stages = 8, .microbatches = 32, .part_layers = {}};
  const StageActivations s = stage_activations(m, l, 1, pipe, 3);
  EXPECT_EQ(s.in_flight, 32);
  EXPECT_EQ(s.kept_bytes, 32 * 12 * dense_layer_activations(m, l).kept_bytes);
}

// Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm) holds one pass more than its
// schedule: the extra warmup forward, and the steady forward launched beside the first backward.
TEST(Activations, CombinedOneFOneBHoldsOnePassMore) {
  const ModelSpec m = preset("gpt-175b");
  const ActivationLayout l = unfused(1, 8, true, Recompute::kSelective);
  const std::int64_t layer = dense_layer_activations(m, l).kept_bytes;
  // Interleaved, p 8, v 2: 23 passes at stage 0 (above), 24 combined: the 24th is chunk 0's
  // (forwards take the chunks in groups of p), so chunk 0 (6 layers and the embedding) 16, chunk 1 8.
  PipelineLayout pipe{.schedule = PipelineSchedule::kInterleaved, .stages = 8, .virtual_stages = 2, .microbatches = 64,
                      .part_layers = {}, .combined_1f1b = true};
  const StageActivations first = stage_activations(m, l, 1, pipe, 0);
  EXPECT_EQ(first.in_flight, 24);
  EXPECT_EQ(first.kept_bytes, 144 * layer + 16 * embedding_activations(m, l));
  // The last stage: (v - 1) p + 1 = 9 passes, 10 combined: chunk 0 (part 7) 8, chunk 1 (part 15,
  // with the output's tensors) 2.
  const StageActivations last = stage_activations(m, l, 1, pipe, 7);
  EXPECT_EQ(last.in_flight, 10);
  EXPECT_EQ(last.kept_bytes, 60 * layer + 2 * output_activations(m, l));
  // Without pipelining: one microbatch in flight, two combined; never more than the step runs.
  pipe = {.schedule = PipelineSchedule::kOneFOneB, .stages = 1, .microbatches = 4, .part_layers = {},
          .combined_1f1b = true};
  EXPECT_EQ(stage_activations(m, l, 1, pipe, 0).in_flight, 2);
  pipe.microbatches = 1;
  EXPECT_EQ(stage_activations(m, l, 1, pipe, 0).in_flight, 1);
  // Plain 1F1B with p > 1 does not combine.
  pipe = {.schedule = PipelineSchedule::kOneFOneB, .stages = 8, .microbatches = 32, .part_layers = {},
          .combined_1f1b = true};
  EXPECT_THAT(input_error_of([&] { stage_activations(m, l, 1, pipe, 0); }),
              HasSubstr("the combined 1F1B runs without pipelining or with the interleaved schedule"));
}

TEST(Activations, UnevenPartsCountTheirOwnLayers) {
  // GPT-175B's 96 layers over 8 stages as 11 + 12 x 6 + 13: stage 0 holds 8 microbatches of its
  // 11 layers (and the embedding), the last stage one of its 13 (and the output's tensors).
  const ModelSpec m = preset("gpt-175b");
  const ActivationLayout l = unfused(1, 8, true, Recompute::kSelective);
  PipelineLayout pipe{.schedule = PipelineSchedule::kOneFOneB, .stages = 8, .microbatches = 32, .part_layers = {}};
  const std::int64_t layer = dense_layer_activations(m, l).kept_bytes;
  const StageActivations even = stage_activations(m, l, 1, pipe, 0);
  pipe.part_layers = std::vector<int>(8, 12);
  EXPECT_EQ(stage_activations(m, l, 1, pipe, 0).kept_bytes, even.kept_bytes);  // the even split, spelled out
  pipe.part_layers = {11, 12, 12, 12, 12, 12, 12, 13};
  EXPECT_EQ(stage_activations(m, l, 1, pipe, 0).kept_bytes, 8 * (11 * layer + embedding_activations(m, l)));
  EXPECT_EQ(stage_activations(m, l, 1, pipe, 3).kept_bytes, 5 * 12 * layer);
  EXPECT_EQ(stage_activations(m, l, 1, pipe, 7).kept_bytes, 13 * layer + output_activations(m, l));
  // Interleaved: stage 0's two chunks hold parts 0 and 8 (11 and 12 of 16 parts' layers).
  pipe = {.schedule = PipelineSchedule::kInterleaved, .stages = 8, .virtual_stages = 2, .microbatches = 64,
          .part_layers = std::vector<int>(16, 6)};
  pipe.part_layers[0] = 5;
  pipe.part_layers[15] = 7;
  // 23 passes: chunk 0 (5 layers and the embedding) 15 of them, chunk 1 (6 layers) 8.
  EXPECT_EQ(stage_activations(m, l, 1, pipe, 0).kept_bytes, 15 * (5 * layer + embedding_activations(m, l)) + 8 * 6 * layer);
  pipe.part_layers[1] = 7;  // 97 layers
  EXPECT_THAT(input_error_of([&] { stage_activations(m, l, 1, pipe, 0); }),
              HasSubstr("the part layers sum to 97; the model has 96"));
  pipe.part_layers.pop_back();
  EXPECT_THAT(input_error_of([&] { stage_activations(m, l, 1, pipe, 0); }),
              HasSubstr("the part layers list 15 parts; the schedule cuts 16"));
}

ActivationLayout flash(std::int64_t b, int tp, bool sp, Recompute r = Recompute::kNone) {
  return {.micro_batch = b, .tp = tp, .sequence_parallel = sp, .recompute = r, .attention = AttentionKernel::kFlash,
          .moe_strategy = MemoryStrategy::kNone, .modules = {}};
}

TEST(Activations, Llama3_70bByHand) {
  // h 8192, 64 heads of 128 in 8 key/value groups, SwiGLU d_ffn 28672, RMSNorm, bf16, no dropout;
  // b 1, s 8192, t 8 with SP, flash attention. Bytes per token:
  //   d_model-wide, split over t by SP: two norm inputs, the QKV and fc1 inputs:
  //     4 x 8192 x 2 / 8 = 8192
  //   q 8192, k 1024, v 1024, the attention output 8192 = 18432 columns / 8 x 2 = 4608
  //   softmax statistics: 64 / 8 heads x 4 = 32
  //   fc1 output 2 x 28672 + the SwiGLU output 28672 = 86016 / 8 x 2 = 21504
  // 34336 bytes a token x 8192 tokens = 281,280,512.
  const ModelSpec m = preset("llama-3-70b");
  const LayerActivations none = dense_layer_activations(m, flash(1, 8, true));
  EXPECT_EQ(none.kept_bytes, 281'280'512);
  EXPECT_EQ(none.recompute_bytes, 0);
  // Selective drops the statistics (32 a token) and re-creates them with the attention output
  // (8192 / 8 x 2 = 2048): 2080 a token.
  const LayerActivations selective = dense_layer_activations(m, flash(1, 8, true, Recompute::kSelective));
  EXPECT_EQ(selective.kept_bytes, 34304 * 8192);
  EXPECT_EQ(selective.recompute_bytes, 2080 * 8192);
  // Full keeps the input, 8192 x 2 / 8 = 2048 a token; the rest is re-created.
  const LayerActivations full = dense_layer_activations(m, flash(1, 8, true, Recompute::kFull));
  EXPECT_EQ(full.kept_bytes, 2048 * 8192);
  EXPECT_EQ(full.recompute_bytes, 281'280'512 - 2048 * 8192);
  // Context parallelism halves every term (all are linear in the rank's tokens with flash).
  ActivationLayout cp2 = flash(1, 8, true);
  cp2.cp = 2;
  EXPECT_EQ(dense_layer_activations(m, cp2).kept_bytes, 281'280'512 / 2);
  // The output side: two d_model inputs (2 x 8192 x 2 / 8 = 4096 a token), fp32 logits over
  // 128256 / 8 = 16032 vocabulary entries (64128 a token).
  EXPECT_EQ(output_activations(m, flash(1, 8, true)), (4096 + 64128) * 8192);
}

TEST(Activations, DeepSeekV3ByHand) {
  // h 7168, MLA 128 heads (q_lora 1536, kv_lora 512, q/k heads 128 + 64 rope, v 128), 256
  // experts top-8 of d_ffn 2048 at capacity factor 1, one shared expert of 2048, SwiGLU, bf16,
  // RMSNorm, no dropout; b 1, s 4096, t 1, flash. Attention, elements a token:
  //   norm input and the down projections' input 2 x 7168; q latent norm input and up input
  //   2 x 1536; kv latent 2 x 512: 18432
  //   q and k 2 x 128 x 192 = 49152; v and the output 2 x 128 x 128 = 32768: 81920
  // 100352 x 2 bytes + statistics 128 x 4 = 201216 bytes a token.
  const ModelSpec m = preset("deepseek-v3");
  const std::int64_t attention = 201216;
  // MoE block, bytes a token: norm and router inputs 2 x 7168 x 2 = 28672; fp32 scores 256 x 4 and
  // top-k weights 8 x 4 = 1056; shared expert fc1 output 4096 + SwiGLU output 2048 = 6144 x 2 =
  // 12288: 42016. Rows: C = floor(8 x 1 x 4096 / 256) = 128 per expert, 256 x 128 = 32768 rows of
  // fc1 input 7168, fc1 output 4096, SwiGLU output 2048, expert output 7168: 20480 x 2 = 40960.
  const std::int64_t moe = (attention + 42016) * 4096 + 32768LL * 40960;
  EXPECT_EQ(moe, 2'338'455'552);
  EXPECT_EQ(moe_layer_activations(m, flash(1, 1, false), 1).kept_bytes, moe);
  // Under uniform routing ep moves rows between ranks without changing how many a rank holds.
  EXPECT_EQ(moe_layer_activations(m, flash(1, 1, false), 64).kept_bytes, moe);
  // Dense layers (d_ffn 18432): norm and fc1 inputs 28672 + (36864 + 18432) x 2 = 139264 a token.
  EXPECT_EQ(dense_layer_activations(m, flash(1, 1, false)).kept_bytes, (attention + 139264) * 4096);
  EXPECT_EQ(layer_activations(m, flash(1, 1, false), 1, 2).kept_bytes, (attention + 139264) * 4096);
  EXPECT_EQ(layer_activations(m, flash(1, 1, false), 1, 3).kept_bytes, moe);
}

TEST(Activations, DeepSeekV3TensorParallelSplitsHeadsAndColumnsNotRows) {
  // t 8 with SP: the d_model-wide terms and the router's / 8 (token side of the MoE block: (28672
  // + 1056) / 8 = 3716), heads and columns / 8 (attention: 18432 x 2 / 8 + 81920 x 2 / 8 + 16 x 4 =
  // 25152; shared expert 12288 / 8 = 1536); the dispatched rows stay whole (gathered over the
  // group) but for their columns / 8 and the expert output, which follows the tokens: rows x
  // (7168 + 6144 / 8 + 7168 / 8) x 2 = rows x 17664.
  const ModelSpec m = preset("deepseek-v3");
  const std::int64_t per_token = 25152 + 3716 + 1536;
  EXPECT_EQ(moe_layer_activations(m, flash(1, 8, true), 8).kept_bytes, per_token * 4096 + 32768LL * 17664);
}

TEST(Activations, LastStageCarriesTheMtpModules) {
  // DeepSeek-V3 on one stage: 3 dense and 58 MoE layers, the embedding, the output side and one MTP
  // module (an MoE layer, two norm inputs, the 2h projection input, its own output side).
  const ModelSpec m = preset("deepseek-v3");
  const ActivationLayout l = flash(1, 1, false);
  const StageActivations s = stage_activations(m, l, 1, PipelineLayout{}, 0);
  const std::int64_t dense = dense_layer_activations(m, l).kept_bytes;
  const std::int64_t moe = moe_layer_activations(m, l, 1).kept_bytes;
  EXPECT_EQ(mtp_activations(m, l), 4 * 7168 * 2 * 4096 + output_activations(m, l));
  EXPECT_EQ(s.kept_bytes, 3 * dense + 59 * moe + embedding_activations(m, l) + output_activations(m, l) +
                              mtp_activations(m, l));
}

TEST(Activations, RefusesLayoutsTheModelDoesNotDivide) {
  const ModelSpec gpt = preset("gpt-175b");
  EXPECT_THAT(input_error_of([&] { dense_layer_activations(gpt, flash(1, 5, false)); }),
              HasSubstr("--tp 5 must divide the attention heads (96)"));
  ActivationLayout cp = unfused(1, 1, false);
  cp.cp = 2;
  EXPECT_THAT(input_error_of([&] { dense_layer_activations(gpt, cp); }), HasSubstr("needs flash attention"));
  ActivationLayout odd = flash(1, 8, true);
  odd.seq = 2044;
  EXPECT_THAT(input_error_of([&] { dense_layer_activations(gpt, odd); }), HasSubstr("must divide the sequence"));
  EXPECT_THAT(input_error_of([&] { moe_layer_activations(gpt, flash(1, 1, false), 1); }), HasSubstr("no MoE layers"));
  EXPECT_THAT(input_error_of([&] { moe_layer_activations(preset("deepseek-v3"), flash(1, 1, false), 3); }),
              HasSubstr("--ep 3 must divide the experts (256)"));
  PipelineLayout seven;
  seven.stages = 7;
  EXPECT_THAT(input_error_of([&] { stage_activations(gpt, flash(1, 1, false), 1, seven, 0); }),
              HasSubstr("must divide the 96 layers"));
}

}  // namespace
}  // namespace moesim
