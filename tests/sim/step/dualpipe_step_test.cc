// The whole training step under DualPipe (sim/step with PipelineSchedule::kDualPipe): the rules it
// refuses, the transfers of the two directions, the two copies of every model part (model states,
// one gradient reduction per layer over both copies' replicas), memory against the closed-form
// in-flight activations, and the bubble against 1F1B's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr auto& cluster = testing::a100_cluster;
std::string error_of(const StepSpec& spec, const std::string& model = "gpt-1.7b") {
  return testing::step_error_of(spec, model);
}

ModelSpec gpt() { return testing::model_preset("gpt-1.7b"); }

// testing::small_gpt_step (GPT-1.7B, tp 2, pp 4, dp 2: 8 microbatches per pipeline, 2 x pp).
StepSpec dualpipe_step(PipelineSchedule schedule = PipelineSchedule::kDualPipe) {
  return testing::small_gpt_step_under(schedule);
}

TEST(DualPipeStep, RefusesEachRuleNamingTheFlag) {
  StepSpec s = dualpipe_step();
  s.layout.gpus = 24;
  s.layout.pp = 3;
  s.global_batch = 32;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--schedule dualpipe: dualpipe needs an even number of stages (got 3)"));
  s = dualpipe_step();
  s.global_batch = 12;  // 6 microbatches per pipeline
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("at least 2 x stages (DualPipe's rule): 6 microbatches, 4 stages"));
  s = dualpipe_step();
  s.layout.vpp = 2;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("virtual_stages must be 1 (got 2)"));
  s = dualpipe_step();
  s.recompute = Recompute::kFull;  // allowed: what it re-creates lives until the W pass
  EXPECT_EQ(error_of(s), "");
  s = dualpipe_step();
  s.zero_stage = 3;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--schedule dualpipe with --zero 3"));
  EXPECT_EQ(error_of(dualpipe_step()), "");
}

// Every microbatch crosses every stage boundary once each way, on its own direction's path: the
// first half of the microbatches forward from stage s to s + 1, the second half from s + 1 to s.
TEST(DualPipeStep, TransfersFollowEachMicrobatchsDirection) {
  const StepGraph sg = build_step_graph(gpt(), cluster(16), dualpipe_step());
  const std::regex name(R"(mb(\d+)\.p2p\.(fwd|bwd)\.part(\d+)\.s(\d+)-s(\d+))");
  int transfers = 0;
  for (TaskIndex i = 0; i < sg.graph.num_tasks(); ++i) {
    const Task& t = sg.graph.task(i);
    if (t.stream != StreamClass::kCommPipeline) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(t.id, m, name)) << t.id;
    const int mb = std::stoi(m[1]), part = std::stoi(m[3]), from = std::stoi(m[4]), to = std::stoi(m[5]);
    const bool forward = m[2] == "fwd";
    const PartPlace consumer = place_of(PipelineSchedule::kDualPipe, sg.shape.pipeline, mb, part);
    EXPECT_EQ(to, consumer.stage) << t.id;
    const bool first_half = mb < 4;
    EXPECT_EQ(to - from, (first_half == forward) ? 1 : -1) << t.id;
    ++transfers;
  }
  EXPECT_EQ(transfers, 2 * 8 * 3);
}

// Stage s holds parts s and p - 1 - s: its model states (ZeRO 0) are 1F1B's stages s and
// p - 1 - s together, both end stages holding the embedding and the head.
TEST(DualPipeStep, HoldsTwoPartsPerStage) {
  const StepGraph dual = build_step_graph(gpt(), cluster(16), dualpipe_step());
  const StepGraph one = build_step_graph(gpt(), cluster(16), dualpipe_step(PipelineSchedule::kOneFOneB));
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(dual.model_state_bytes[static_cast<std::size_t>(s)],
              one.model_state_bytes[static_cast<std::size_t>(s)] + one.model_state_bytes[static_cast<std::size_t>(3 - s)]);
}

// One reduction per layer (not one per copy), over both copies' data-parallel ranks: stage s's
// ranks {4s, 4s + 2} and its mirror's; the tied embedding's copies sum within the end stages.
TEST(DualPipeStep, ReducesEachLayersTwoCopiesOnce) {
  const StepGraph sg = build_step_graph(gpt(), cluster(16), dualpipe_step());
  EXPECT_EQ(sg.shape.data_group(1), (std::vector<int>{4, 6, 8, 10}));
  EXPECT_EQ(sg.shape.data_group(3), (std::vector<int>{0, 2, 12, 14}));
  for (int l = 0; l < 24; ++l) {
    int reductions = 0;
    const std::regex name("mb\\d+\\.L" + std::to_string(l) + "\\.bwd\\.grad\\.reduce");
    for (TaskIndex i = 0; i < sg.graph.num_tasks(); ++i) {
      const Task& t = sg.graph.task(i);
      if (!std::regex_match(t.id, name)) continue;
      ++reductions;
      EXPECT_EQ(sg.graph.group(std::get<CollectiveWork>(t.work).group).size(), 4U);
    }
    EXPECT_EQ(reductions, 1) << "layer " << l;
  }
  for (TaskIndex i = 0; i < sg.graph.num_tasks(); ++i) EXPECT_NE(sg.graph.task(i).id, "embedding.grad.allreduce");
}

// The simulated peak of each stage is its model states plus the closed-form activations of the
// p + 1 chunks its program holds at its peak (DeepSeek-V3 report Table 2), to the byte.
TEST(DualPipeStep, PeakMemoryIsModelStatesPlusPPlusOneChunks) {
  const SimulatedStep sim = simulate_training_step(gpt(), cluster(16), dualpipe_step());
  testing::expect_peak_within_closed_form(gpt(), sim, PipelineSchedule::kDualPipe, 5, 12);
}

// An overlapped pair's forward and backward run interleaved (StepBuilder::emit_overlapped): on the
// compute stream a backward kernel comes before a later forward kernel, and the forward's
// tensor-parallel collectives run while the backward's kernels do; the host issues the pair in
// that order (--host-launch-us runs, no slower than without a host).
TEST(DualPipeStep, AnOverlappedPairsCollectivesRunBesideTheOtherPassesKernels) {
  const SimulatedStep sim = simulate_training_step(gpt(), cluster(16), dualpipe_step());
  ASSERT_FALSE(sim.graph.interleaved.empty());
  EXPECT_TRUE(testing::backward_kernels_precede_forward_kernels(sim));
  EXPECT_GT(testing::collectives_beside_the_other_pass(sim), 0);
  StepSpec hosted = dualpipe_step();
  hosted.host_launch_ns = 5000;
  const SimulatedStep with_host = simulate_training_step(gpt(), cluster(16), hosted);
  EXPECT_GE(with_host.report.step_ns, sim.report.step_ns);
}

// (TrainingStep.RespectsDependenciesAndBoundsTheStepByItsTasks covers DualPipe's dependencies.)
TEST(DualPipeStep, IdlesLessThanOneFOneB) {
  const SimulatedStep dual = simulate_training_step(gpt(), cluster(16), dualpipe_step());
  const SimulatedStep one = simulate_training_step(gpt(), cluster(16), dualpipe_step(PipelineSchedule::kOneFOneB));
  EXPECT_GT(dual.report.bubble_fraction, 0);
  EXPECT_LT(dual.report.bubble_fraction, one.report.bubble_fraction);
}

}  // namespace
}  // namespace moesim
