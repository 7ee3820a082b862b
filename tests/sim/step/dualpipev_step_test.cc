// The whole training step under DualPipeV (sim/step with PipelineSchedule::kDualPipeV): the rules it
// refuses, the V's transfers (down the first arm, back up the second, no transfer at its bottom),
// the first and last model parts on stage 0 with one copy of every parameter, memory against the
// closed-form 2p + 1 in-flight chunks, and the bubble against 1F1B's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr auto& cluster = testing::a100_cluster;

ModelSpec gpt() { return testing::model_preset("gpt-1.7b"); }

// testing::small_gpt_step (GPT-1.7B, 24 layers, tp 2, pp 4, dp 2: 8 microbatches per pipeline,
// 2 x pp): 8 parts of 3 layers.
StepSpec v_step(PipelineSchedule schedule = PipelineSchedule::kDualPipeV) {
  return testing::small_gpt_step_under(schedule);
}

TEST(DualPipeVStep, RefusesEachRuleNamingTheFlag) {
  StepSpec s = v_step();
  s.global_batch = 12;  // 6 microbatches per pipeline
  EXPECT_THAT(testing::step_error_of(s, "gpt-1.7b"),
              ::testing::HasSubstr("--schedule dualpipev: dualpipev needs at least 2 x stages microbatches"));
  s = v_step();
  s.layout.vpp = 2;
  EXPECT_THAT(testing::step_error_of(s, "gpt-1.7b"), ::testing::HasSubstr("virtual_stages must be 1 (got 2)"));
  s = v_step();
  s.recompute = Recompute::kFull;  // allowed: what it re-creates lives until the W pass
  EXPECT_EQ(testing::step_error_of(s, "gpt-1.7b"), "");
  s = v_step();
  s.zero_stage = 3;
  EXPECT_THAT(testing::step_error_of(s, "gpt-1.7b"), ::testing::HasSubstr("--schedule dualpipev with --zero 3"));
  s = v_step();
  s.layout.pp = 3;  // any number of stages: 6 parts of 4 layers, dp 4, 6 microbatches
  s.layout.gpus = 24;
  s.global_batch = 24;
  EXPECT_EQ(testing::step_error_of(s, "gpt-1.7b"), "");
  EXPECT_EQ(testing::step_error_of(v_step(), "gpt-1.7b"), "");
}

// A microbatch's forward goes down the first arm (part q on stage q, q < p) and back up the second
// (part q on stage 2p - 1 - q): every boundary but the V's bottom (parts p - 1 and p, both on stage
// p - 1) is a transfer, each way: 2 (p - 1) per microbatch and direction.
TEST(DualPipeVStep, TransfersGoDownTheVAndBackUp) {
  const StepGraph sg = build_step_graph(gpt(), cluster(16), v_step());
  const std::regex name(R"(mb(\d+)\.p2p\.(fwd|bwd)\.part(\d+)\.s(\d+)-s(\d+))");
  int transfers = 0;
  for (TaskIndex i = 0; i < sg.graph.num_tasks(); ++i) {
    const Task& t = sg.graph.task(i);
    if (t.stream != StreamClass::kCommPipeline) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(t.id, m, name)) << t.id;
    const int mb = std::stoi(m[1]), part = std::stoi(m[3]), from = std::stoi(m[4]), to = std::stoi(m[5]);
    EXPECT_EQ(to, place_of(PipelineSchedule::kDualPipeV, sg.shape.pipeline, mb, part).stage) << t.id;
    EXPECT_EQ(std::abs(to - from), 1) << t.id;
    ++transfers;
  }
  EXPECT_EQ(transfers, 2 * 8 * 2 * 3);
}

// Stage 0 holds parts 0 and 2p - 1: the embedding, the head and the loss, one copy of the tied
// table (nothing to all-reduce between stages); the other stages hold two parts of layers each, as
// a middle stage of 1F1B over the same pp holds its layers.
TEST(DualPipeVStep, HoldsBothEndsOnStageZeroAndEveryParameterOnce) {
  const StepGraph v = build_step_graph(gpt(), cluster(16), v_step());
  const StepGraph one = build_step_graph(gpt(), cluster(16), v_step(PipelineSchedule::kOneFOneB));
  for (int s = 1; s < 4; ++s)
    EXPECT_EQ(v.model_state_bytes[static_cast<std::size_t>(s)], one.model_state_bytes[1]) << "stage " << s;
  EXPECT_GT(v.model_state_bytes[0], v.model_state_bytes[1]);
  // 1F1B's last stage holds a second copy of the tied table for its head: DualPipeV does not.
  EXPECT_LT(v.model_state_bytes[0] + 3 * v.model_state_bytes[1],
            one.model_state_bytes[0] + one.model_state_bytes[1] + one.model_state_bytes[2] + one.model_state_bytes[3]);
  int heads = 0;
  for (TaskIndex i = 0; i < v.graph.num_tasks(); ++i) {
    const Task& t = v.graph.task(i);
    EXPECT_NE(t.id, "embedding.grad.allreduce");
    if (t.id.find(".head.") == std::string::npos || t.rank < 0) continue;
    ++heads;
    EXPECT_GE(t.rank, v.shape.stage_rank(0)) << t.id;
    EXPECT_LT(t.rank, v.shape.stage_rank(0) + v.shape.layout.stage_size()) << t.id;
  }
  EXPECT_GT(heads, 0);
}

// The simulated peak of each stage is its model states plus at most the closed-form activations of
// the 2p + 1 chunks its program holds at its peak (DualPipe's PP + 1 with PP = 2p stages).
TEST(DualPipeVStep, PeakMemoryIsModelStatesPlusTwoPPlusOneChunks) {
  const SimulatedStep sim = simulate_training_step(gpt(), cluster(16), v_step());
  testing::expect_peak_within_closed_form(gpt(), sim, PipelineSchedule::kDualPipeV, 9, 6);
}

TEST(DualPipeVStep, IdlesLessThanOneFOneB) {
  const SimulatedStep v = simulate_training_step(gpt(), cluster(16), v_step());
  const SimulatedStep one = simulate_training_step(gpt(), cluster(16), v_step(PipelineSchedule::kOneFOneB));
  EXPECT_GT(v.report.bubble_fraction, 0);
  EXPECT_LT(v.report.bubble_fraction, one.report.bubble_fraction);
  EXPECT_LT(v.report.step_ns, one.report.step_ns);
}

}  // namespace
}  // namespace moesim
