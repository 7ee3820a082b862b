// FP8 training in the whole step (--precision fp8): which GEMMs run in fp8, the quantisation
// kernels Transformer Engine adds around each linear layer, and the memory of the cached fp8
// weights. GPT-1.7B (fp16 storage, 24 layers, hidden 2,304, MLP 9,216) on 16 H100s: tp 2, pp 4.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

SimulatedStep simulate(DType precision) {
  StepSpec s = testing::small_gpt_step();
  s.gemm_precision = precision;
  return simulate_training_step(testing::model_preset("gpt-1.7b"), testing::cluster_preset("dgx-h100-ndr", 16), s);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Tasks of stage 0's rank whose id ends with `tail`.
int count_ending(const TaskGraph& g, const std::string& tail) {
  int n = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) n += g.task(i).rank == 0 && ends_with(g.task(i).id, tail);
  return n;
}

constexpr std::int64_t kHidden = 2304, kFfn = 9216, kTokens = 1024, kTp = 2, kLayersPerStage = 6,
                       kMicrobatches = 8;  // global batch 16 over dp 2

TEST(Fp8Step, LinearLayersInFp8AttentionRouterAndHeadInTheStorageType) {
  const SimulatedStep sim = simulate(DType::kFp8);
  const TaskGraph& g = sim.graph.graph;
  int fp8 = 0, storage = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const auto* w = std::get_if<GemmWork>(&g.task(i).work);
    if (w == nullptr) continue;
    const std::string& id = g.task(i).id;
    const bool keeps_storage = id.find(".core") != std::string::npos || id.find("logits") != std::string::npos;
    EXPECT_EQ(w->dtype, keeps_storage ? DType::kFp16 : DType::kFp8) << id;
    (keeps_storage ? storage : fp8) += 1;
  }
  EXPECT_GT(fp8, 0);
  EXPECT_GT(storage, 0);
  const SimulatedStep plain = simulate(DType::kBf16);
  for (TaskIndex i = 0; i < plain.graph.graph.num_tasks(); ++i)
    EXPECT_EQ(plain.graph.graph.task(i).id.find(".fp8."), std::string::npos) << plain.graph.graph.task(i).id;
}

TEST(Fp8Step, QuantisesInputsAndGradientsEveryMicrobatchAndWeightsOnce) {
  const SimulatedStep sim = simulate(DType::kFp8);
  const TaskGraph& g = sim.graph.graph;
  // Four linear layers per transformer layer: qkv, proj, fc1, fc2.
  EXPECT_EQ(count_ending(g, ".fp8.input"), 4 * kLayersPerStage * kMicrobatches);
  EXPECT_EQ(count_ending(g, ".fp8.grad"), 4 * kLayersPerStage * kMicrobatches);
  EXPECT_EQ(count_ending(g, ".fp8.weight"), 4 * kLayersPerStage);
  // fc1's input cast of one microbatch: tokens x hidden read in fp16, written twice in one byte.
  int found = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    if (g.task(i).id != "mb1.L0.fwd.fc1.fp8.input") continue;
    const auto& w = std::get<ElementwiseWork>(g.task(i).work);
    EXPECT_EQ(w.bytes_read, kTokens * kHidden * 2);
    EXPECT_EQ(w.bytes_written, 2 * kTokens * kHidden);
    ++found;
  }
  EXPECT_EQ(found, 1);
}

TEST(Fp8Step, CachedWeightsAddTwoBytesPerLinearWeightToThePeak) {
  const SimulatedStep fp8 = simulate(DType::kFp8);
  const SimulatedStep plain = simulate(DType::kBf16);
  // Per layer and tensor-parallel rank: qkv h x 3h/tp, proj h/tp x h, fc1 h x f/tp, fc2 f/tp x h.
  const std::int64_t linear = (4 * kHidden * kHidden + 2 * kHidden * kFfn) / kTp;
  const std::int64_t cache = 2 * linear * kLayersPerStage;
  for (std::size_t s = 0; s < fp8.report.stages.size(); ++s) {
    // The caches are made in the first microbatch's forward, before any stage's activation peak.
    EXPECT_EQ(fp8.report.stages[s].peak_memory_bytes - plain.report.stages[s].peak_memory_bytes, cache) << s;
  }
  EXPECT_GT(fp8.report.step_ns, 0);
}

// DualPipe's reverse direction starts with the second half of the microbatches: each of a stage's
// two chunks still quantises its weights once, in its own first forward (4 linear layers x 6
// layers x 2 chunks), and every microbatch's input once per linear layer it passes.
TEST(Fp8Step, EachChunkQuantisesItsWeightsOnceUnderDualPipe) {
  StepSpec s = testing::small_gpt_step();
  s.gemm_precision = DType::kFp8;
  s.schedule = PipelineSchedule::kDualPipe;
  const SimulatedStep sim =
      simulate_training_step(testing::model_preset("gpt-1.7b"), testing::cluster_preset("dgx-h100-ndr", 16), s);
  const TaskGraph& g = sim.graph.graph;
  EXPECT_EQ(count_ending(g, ".fp8.weight"), 4 * 6 * 2);
  EXPECT_EQ(count_ending(g, ".fp8.input"), 4 * 6 * kMicrobatches);
  // The reverse chunk's first forward is a microbatch of the second half.
  int reverse_casts = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const std::string& id = g.task(i).id;
    if (g.task(i).rank == 0 && ends_with(id, ".fp8.weight") && id.rfind("mb0.", 0) != 0) ++reverse_casts;
  }
  EXPECT_EQ(reverse_casts, 4 * 6);
}

}  // namespace
}  // namespace moesim
