// The layout planner's fast step estimate (sim/search/step_estimate.h) against full simulations
// of the same steps, on a grid of small layouts of GPT-1.7B and GPT-22B on 16 and 32 GPUs: every
// schedule the planner enumerates (1F1B, interleaved), tensor, context and pipeline parallelism,
// recomputation and ZeRO 1. The estimate only ranks layouts (the planner reports simulated
// figures), so what matters is that its error stays small against the gaps between layouts.
#include "sim/search/step_estimate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/spec/loader.h"
#include "sim/step/step_shape.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim::search {
namespace {

ModelSpec preset(const std::string& name) { return moesim::testing::model_preset(name); }
ClusterSpec cluster(int gpus) { return moesim::testing::a100_cluster(gpus); }

struct Case {
  const char* model;
  int gpus, tp, cp, pp, vpp;
  std::int64_t global_batch, micro_batch;
  Recompute recompute;
  int zero;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;  // interleaved where vpp > 1
};

StepSpec spec_of(const Case& c) {
  StepSpec s;
  s.layout = StepLayout{c.gpus, c.tp, c.pp, c.vpp, 1, c.cp};
  s.global_batch = c.global_batch;
  s.micro_batch = c.micro_batch;
  s.seq = 1024;
  s.recompute = c.recompute;
  s.sequence_parallel = c.tp > 1;
  s.zero_stage = c.zero;
  if (c.schedule != PipelineSchedule::kOneFOneB) s.schedule = c.schedule;
  return s;
}

// The largest error measured on this grid (the test prints each): 3.8%, full recomputation with tp 2 x pp 2,
// where the sample overestimates. The bound is the 5% the planner was asked to meet; it leaves
// room for cost-model changes that move both figures together.
constexpr double kTolerance = 0.05;
// The MoE cases below measured within 0.5% (each printed); held to 2%, so that a change that loses
// what they test (the pairs' overlap, the passes beside the reductions) shows.
constexpr double kTightTolerance = 0.02;

TEST(StepEstimate, IsWithinFivePercentOfTheFullSimulationOnAGridOfSmallLayouts) {
  const Case cases[] = {
      {"gpt-1.7b", 16, 1, 1, 4, 1, 64, 1, Recompute::kNone, 0},
      {"gpt-1.7b", 16, 2, 1, 4, 1, 64, 2, Recompute::kNone, 1},
      {"gpt-1.7b", 16, 2, 1, 2, 1, 64, 1, Recompute::kFull, 0},
      {"gpt-1.7b", 16, 1, 1, 8, 1, 32, 1, Recompute::kNone, 0},
      {"gpt-1.7b", 16, 2, 1, 4, 2, 64, 1, Recompute::kNone, 0},
      {"gpt-1.7b", 16, 1, 1, 2, 3, 128, 2, Recompute::kNone, 1},
      {"gpt-1.7b", 16, 1, 2, 4, 1, 32, 1, Recompute::kNone, 1},
      {"gpt-22b", 32, 8, 1, 4, 1, 16, 1, Recompute::kNone, 0},
      {"gpt-22b", 32, 4, 1, 8, 2, 32, 1, Recompute::kFull, 0},
      // ZeRO 2 and 3 (plan --zero-stages): every microbatch's reduce-scatters, and 3's gathers.
      {"gpt-1.7b", 16, 2, 1, 2, 1, 64, 1, Recompute::kNone, 2},
      {"gpt-1.7b", 16, 2, 1, 2, 1, 64, 1, Recompute::kNone, 3},
      {"gpt-1.7b", 16, 1, 1, 4, 2, 64, 2, Recompute::kFull, 3},
      // GPipe: its last backward in program order is microbatch 0's, which launches the reductions.
      {"gpt-1.7b", 16, 2, 1, 2, 1, 64, 1, Recompute::kFull, 0, PipelineSchedule::kGpipe},
      {"gpt-22b", 32, 4, 1, 2, 1, 32, 1, Recompute::kFull, 1, PipelineSchedule::kGpipe},
  };
  double worst = 0;
  for (const Case& c : cases) {
    const StepSpec spec = spec_of(c);
    const ModelSpec model = preset(c.model);
    const ClusterSpec cl = cluster(c.gpus);
    const StepEstimate est = estimate_training_step(model, cl, spec);
    const StepReport full = simulate_training_step(model, cl, spec).report;
    const double error = static_cast<double>(est.step_ns - full.step_ns) / static_cast<double>(full.step_ns);
    std::printf("%-9s %2d GPUs tp %d cp %d pp %d vpp %d mb %lld of %lld %-5s zero %d: full %.4f s, estimate %.4f s "
                "(%+.2f%%, sampled %d microbatches)\n",
                c.model, c.gpus, c.tp, c.cp, c.pp, c.vpp, static_cast<long long>(c.micro_batch),
                static_cast<long long>(c.global_batch), std::string(to_string(c.recompute)).c_str(), c.zero,
                static_cast<double>(full.step_ns) * 1e-9, static_cast<double>(est.step_ns) * 1e-9, 100 * error,
                est.sampled_microbatches);
    EXPECT_FALSE(est.exact);
    EXPECT_LE(std::abs(error), kTolerance) << c.model << " tp " << c.tp << " pp " << c.pp << " vpp " << c.vpp;
    EXPECT_NEAR(est.tokens_per_s_per_gpu / full.tokens_per_s_per_gpu,
                static_cast<double>(full.step_ns) / static_cast<double>(est.step_ns), 1e-9);
    worst = std::max(worst, std::abs(error));
  }
  std::printf("largest error %.2f%%\n", 100 * worst);
}

// The MoE layouts the planner adds: Qwen3-30B-A3B with its experts folded (etp 1 under tp 2,
// the expert-parallel group on one node) and their MLPs in sub-stage chunks, 1F1B and interleaved.
TEST(StepEstimate, IsWithinFivePercentOfTheFullSimulationForFoldedAndChunkedMoeLayouts) {
  struct MoeCase {
    int pp, vpp, etp, chunks;
  };
  const ModelSpec model = preset("qwen3-30b-a3b");
  const ClusterSpec cl = cluster(16);
  for (const MoeCase c : {MoeCase{2, 1, 1, 1}, MoeCase{2, 1, 1, 2}, MoeCase{2, 2, 1, 4}, MoeCase{2, 1, 2, 2}}) {
    StepSpec spec = spec_of({"qwen3-30b-a3b", 16, 2, 1, c.pp, c.vpp, 32, 1, Recompute::kNone, 0});
    spec.layout.ep = 4;
    spec.layout.etp = c.etp;
    spec.moe_chunks = c.chunks;
    const StepEstimate est = estimate_training_step(model, cl, spec);
    const StepReport full = simulate_training_step(model, cl, spec).report;
    const double error = static_cast<double>(est.step_ns - full.step_ns) / static_cast<double>(full.step_ns);
    std::printf("Qwen3-30B-A3B 16 GPUs tp 2 pp %d vpp %d ep 4 etp %d chunks %d: full %.4f s, estimate %.4f s (%+.2f%%)\n",
                c.pp, c.vpp, c.etp, c.chunks, static_cast<double>(full.step_ns) * 1e-9,
                static_cast<double>(est.step_ns) * 1e-9, 100 * error);
    EXPECT_FALSE(est.exact);
    EXPECT_LE(std::abs(error), kTolerance) << "pp " << c.pp << " vpp " << c.vpp << " etp " << c.etp << " chunks " << c.chunks;
  }
}

// The interleaved schedule with the gradient reductions beside the last microbatch's backwards
// (ZeRO 0 and 1): the sample runs two groups of pp, and the passes after a stage's first such
// backward (beside its reductions) are timed apart. Qwen3-30B-A3B on 64 H100s, pp 2 x vpp 4, ep 8,
// 16 microbatches: with one sampled group every chunk's last microbatch was in it and the
// reductions ran beside most backwards, 20.1% (ZeRO 0) and 10.5% (ZeRO 1) slow; now -0.2%, -0.5%.
TEST(StepEstimate, TimesTheBackwardsBesideTheGradientReductionsApart) {
  const ModelSpec model = preset("qwen3-30b-a3b");
  const ClusterSpec cl = moesim::testing::cluster_preset("dgx-h100-ndr", 64);
  for (const int zero : {0, 1}) {
    StepSpec spec = spec_of({"qwen3-30b-a3b", 64, 1, 1, 2, 4, 512, 1, Recompute::kNone, zero});
    spec.seq = 4096;
    spec.layout.ep = 8;
    const StepEstimate est = estimate_training_step(model, cl, spec);
    const StepReport full = simulate_training_step(model, cl, spec).report;
    const double error = static_cast<double>(est.step_ns - full.step_ns) / static_cast<double>(full.step_ns);
    std::printf("Qwen3-30B-A3B 64 H100s pp 2 vpp 4 ep 8 zero %d: full %.4f s, estimate %.4f s (%+.2f%%, sampled %d of %d)\n",
                zero, static_cast<double>(full.step_ns) * 1e-9, static_cast<double>(est.step_ns) * 1e-9, 100 * error,
                est.sampled_microbatches, full.shape.pipeline.microbatches);
    EXPECT_EQ(est.sampled_microbatches, 4);
    EXPECT_LE(std::abs(error), kTightTolerance) << "zero " << zero;
  }
}

// ZeRO 2-3 reduce-scatter every microbatch's gradients on one stream: where the backwards run back
// to back faster than their reductions (GPipe), the step ends when that stream does. GPT-18B on 32
// A100s, tp 4 x pp 2, full recomputation, ZeRO 2, 64 microbatches: GPipe was estimated 10.5% short
// before the stream's end was counted (-0.2% now); 1F1B, whose reductions hide between its
// passes, ends with its passes.
TEST(StepEstimate, EndsNoEarlierThanTheGradientStreamWithZeroTwo) {
  const ModelSpec model = preset("gpt-18b");
  const ClusterSpec cl = cluster(32);
  for (const PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB}) {
    StepSpec spec = spec_of({"gpt-18b", 32, 4, 1, 2, 1, 256, 1, Recompute::kFull, 2, schedule});
    spec.seq = 2048;
    const StepEstimate est = estimate_training_step(model, cl, spec);
    const StepReport full = simulate_training_step(model, cl, spec).report;
    const double error = static_cast<double>(est.step_ns - full.step_ns) / static_cast<double>(full.step_ns);
    std::printf("GPT-18B 32 A100s tp 4 pp 2 zero 2 %s: full %.4f s, estimate %.4f s (%+.2f%%)\n",
                std::string(to_string(schedule)).c_str(), static_cast<double>(full.step_ns) * 1e-9,
                static_cast<double>(est.step_ns) * 1e-9, 100 * error);
    EXPECT_FALSE(est.exact);
    EXPECT_LE(std::abs(error), kTightTolerance) << to_string(schedule);
  }
}

// Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm): each steady pair of a
// forward and a backward runs interleaved, shorter than the two passes one after the other. The
// estimate times each part's paired forward from the sampled pairs, so it tracks the full
// simulation with the overlap as closely as without, and ranks the two variants of a layout as
// the full simulation does. Qwen3-30B-A3B on 16 H100s (whose interference cells were measured).
TEST(StepEstimate, IsWithinTwoPercentOfTheFullSimulationWithTheCombinedOneFOneB) {
  struct CombinedCase {
    int tp, pp, vpp;
    std::int64_t global_batch;
  };
  const ModelSpec model = preset("qwen3-30b-a3b");
  const ClusterSpec cl = moesim::testing::cluster_preset("dgx-h100-ndr", 16);
  for (const CombinedCase c : {CombinedCase{2, 2, 2, 32}, CombinedCase{1, 2, 4, 64}, CombinedCase{2, 1, 1, 32},
                               CombinedCase{1, 4, 2, 64}}) {
    double full_s[2] = {0, 0}, estimate_s[2] = {0, 0};
    for (const bool overlap : {false, true}) {
      StepSpec spec = spec_of({"qwen3-30b-a3b", 16, c.tp, 1, c.pp, c.vpp, c.global_batch, 1, Recompute::kNone, 1});
      spec.layout.ep = 16 / (c.tp * c.pp) >= 8 / c.tp ? 8 / c.tp : 16 / (c.tp * c.pp);
      spec.overlap_moe_ep_comm = overlap;
      const StepEstimate est = estimate_training_step(model, cl, spec);
      const StepReport full = simulate_training_step(model, cl, spec).report;
      const double error = static_cast<double>(est.step_ns - full.step_ns) / static_cast<double>(full.step_ns);
      std::printf("Qwen3-30B-A3B 16 H100s tp %d pp %d vpp %d ep %d%s: full %.4f s, estimate %.4f s (%+.2f%%, "
                  "sampled %d microbatches)\n",
                  c.tp, c.pp, c.vpp, spec.layout.ep, overlap ? " combined" : "", static_cast<double>(full.step_ns) * 1e-9,
                  static_cast<double>(est.step_ns) * 1e-9, 100 * error, est.sampled_microbatches);
      EXPECT_FALSE(est.exact);
      EXPECT_LE(std::abs(error), kTightTolerance) << "tp " << c.tp << " pp " << c.pp << " vpp " << c.vpp << " " << overlap;
      full_s[overlap] = static_cast<double>(full.step_ns);
      estimate_s[overlap] = static_cast<double>(est.step_ns);
    }
    EXPECT_EQ(full_s[1] < full_s[0], estimate_s[1] < estimate_s[0]) << "tp " << c.tp << " pp " << c.pp << " vpp " << c.vpp;
  }
}

// Uneven splits (as --part-layers gives them; the planner's balanced_part_layers makes such splits
// where the parts do not divide the layers): the sample times each part's own passes.
TEST(StepEstimate, IsWithinFivePercentOfTheFullSimulationWithUnevenParts) {
  struct UnevenCase {
    int pp, vpp;
    std::vector<int> parts;
  };
  const ModelSpec model = preset("gpt-1.7b");
  const ClusterSpec cl = cluster(16);
  for (const UnevenCase& c : {UnevenCase{4, 1, {5, 7, 7, 5}}, UnevenCase{8, 1, {2, 3, 3, 4, 4, 3, 3, 2}},
                              UnevenCase{4, 2, {2, 3, 3, 4, 4, 3, 3, 2}}}) {
    StepSpec spec = spec_of({"gpt-1.7b", 16, 2, 1, c.pp, c.vpp, 64, 1, Recompute::kNone, 1});
    spec.part_layers = c.parts;
    const StepEstimate est = estimate_training_step(model, cl, spec);
    const StepReport full = simulate_training_step(model, cl, spec).report;
    const double error = static_cast<double>(est.step_ns - full.step_ns) / static_cast<double>(full.step_ns);
    std::printf("gpt-1.7b 16 GPUs tp 2 pp %d vpp %d, uneven parts: full %.4f s, estimate %.4f s (%+.2f%%)\n", c.pp,
                c.vpp, static_cast<double>(full.step_ns) * 1e-9, static_cast<double>(est.step_ns) * 1e-9, 100 * error);
    EXPECT_FALSE(est.exact);
    EXPECT_LE(std::abs(error), kTolerance) << "pp " << c.pp << " vpp " << c.vpp;
  }
}

// DeepSeek-V3's multi-token prediction module (its layer numbered 61) runs on the last part.
TEST(StepEstimate, TimesTheMultiTokenPredictionModuleOnTheLastPart) {
  StepSpec spec;
  spec.layout = StepLayout{64, 1, 2, 1, 8, 1};
  spec.global_batch = 128;  // 4 microbatches per pipeline; the sample runs 2
  spec.seq = 512;
  spec.part_layers = balanced_part_layers(61, 2);
  const ModelSpec model = preset("deepseek-v3");
  const StepEstimate est = estimate_training_step(model, cluster(64), spec);
  const StepReport full = simulate_training_step(model, cluster(64), spec).report;
  const double error = static_cast<double>(est.step_ns - full.step_ns) / static_cast<double>(full.step_ns);
  std::printf("DeepSeek-V3 64 GPUs pp 2 (%d + %d layers) ep 8: full %.4f s, estimate %.4f s (%+.2f%%)\n",
              spec.part_layers[0], spec.part_layers[1], static_cast<double>(full.step_ns) * 1e-9,
              static_cast<double>(est.step_ns) * 1e-9, 100 * error);
  EXPECT_FALSE(est.exact);
  EXPECT_LE(std::abs(error), kTolerance);
}

TEST(StepEstimate, IsTheSimulationItselfWhenTheSampleIsTheWholeStep) {
  // One microbatch per pipeline: the sample is the step.
  const StepSpec spec = spec_of({"gpt-1.7b", 16, 2, 1, 4, 1, 2, 1, Recompute::kNone, 0});
  const StepEstimate est = estimate_training_step(preset("gpt-1.7b"), cluster(16), spec);
  EXPECT_TRUE(est.exact);
  EXPECT_EQ(est.sampled_microbatches, 1);
  EXPECT_EQ(est.step_ns, simulate_training_step(preset("gpt-1.7b"), cluster(16), spec).report.step_ns);
}

// ZB-H1's and DualPipe's split backward passes are not sampled: the estimate is the full simulation.
TEST(StepEstimate, SimulatesSplitBackwardSchedulesInFull) {
  StepSpec spec = spec_of({"gpt-1.7b", 16, 2, 1, 4, 1, 16, 1, Recompute::kNone, 0});
  for (PipelineSchedule schedule : {PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipe}) {
    spec.schedule = schedule;
    const StepEstimate est = estimate_training_step(preset("gpt-1.7b"), cluster(16), spec);
    const StepReport full = simulate_training_step(preset("gpt-1.7b"), cluster(16), spec).report;
    EXPECT_TRUE(est.exact) << to_string(schedule);
    EXPECT_EQ(est.step_ns, full.step_ns) << to_string(schedule);
    EXPECT_DOUBLE_EQ(est.tokens_per_s_per_gpu, full.tokens_per_s_per_gpu) << to_string(schedule);
  }
}

}  // namespace
}  // namespace moesim::search
