// --use-tp-pp-dp-mapping (StepSpec::tp_pp_dp_mapping): Megatron-LM's rank order tp-cp-pp-dp, the
// experts' tp-ep-pp-dp. The groups of a stage's representative rank in both orders, the rule that
// keeps the experts' stages the dense layers', and what moving the pipeline onto a node changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/step/step_shape.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

StepShape shape_of(const std::string& model, const StepSpec& spec) {
  return derive_step_shape(testing::model_preset(model), testing::a100_cluster(spec.layout.gpus), spec);
}

// GPT-1.7B on 16 GPUs: tp 2, pp 2, dp 4.
StepSpec dense_step(bool mapping) {
  StepSpec s = testing::small_gpt_step();
  s.layout.pp = 2;
  s.tp_pp_dp_mapping = mapping;
  return s;
}

TEST(RankOrder, DefaultOrderPutsAStagesReplicasNextToEachOther) {
  const StepShape shape = shape_of("gpt-1.7b", dense_step(false));
  // rank = ((pp x dp + d) x cp + c) x tp + t: stage 1 starts after stage 0's 8 ranks.
  EXPECT_EQ(shape.stage_rank(1), 8);
  EXPECT_EQ(shape.tensor_group(1), (std::vector<int>{8, 9}));
  EXPECT_EQ(shape.data_group(1), (std::vector<int>{8, 10, 12, 14}));
  EXPECT_EQ(shape.stage_group(0), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(shape.stage_of(7), 0);
  EXPECT_EQ(shape.stage_of(8), 1);
}

TEST(RankOrder, TpPpDpMappingPutsAPipelinesStagesNextToEachOther) {
  const StepShape shape = shape_of("gpt-1.7b", dense_step(true));
  // rank = ((d x pp + pp_index) x cp + c) x tp + t: stage 1 is tp ranks after stage 0, and a
  // stage's replicas are tp x pp apart.
  EXPECT_EQ(shape.stage_rank(1), 2);
  EXPECT_EQ(shape.tensor_group(1), (std::vector<int>{2, 3}));
  EXPECT_EQ(shape.data_group(1), (std::vector<int>{2, 6, 10, 14}));
  EXPECT_EQ(shape.stage_group(0), (std::vector<int>{0, 1, 4, 5, 8, 9, 12, 13}));
  for (int r : shape.stage_group(1)) EXPECT_EQ(shape.stage_of(r), 1) << r;
  for (int r : shape.stage_group(0)) EXPECT_EQ(shape.stage_of(r), 0) << r;
}

TEST(RankOrder, ExpertGroupsFollowTheExpertOrderTpEpPpDp) {
  // Qwen3-30B-A3B, tp 2, pp 2, dp 4, the experts folded to etp 1 x ep 2 (= tp x cp) x edp 4.
  StepSpec s = testing::folded_moe_step();
  s.tp_pp_dp_mapping = true;
  const StepShape shape = shape_of("qwen3-30b-a3b", s);
  EXPECT_EQ(shape.stage_rank(1), 2);
  EXPECT_EQ(shape.expert_tensor_group(1), (std::vector<int>{2}));
  EXPECT_EQ(shape.expert_group(1), (std::vector<int>{2, 3}));
  // expert rank = ((d x pp + pp_index) x ep + e) x etp + t: the replicas are etp x ep x pp = 4 apart.
  EXPECT_EQ(shape.expert_data_group(1), (std::vector<int>{2, 6, 10, 14}));
  s.tp_pp_dp_mapping = false;  // tp-ep-dp-pp: replicas etp x ep = 2 apart within stage 1's ranks 8-15
  EXPECT_EQ(shape_of("qwen3-30b-a3b", s).expert_data_group(1), (std::vector<int>{8, 10, 12, 14}));
}

TEST(RankOrder, ContextParallelRanksSitBetweenTensorAndPipeline) {
  // GPT-1.7B on 16 GPUs: tp 2, cp 2, pp 2, dp 2; rank = ((d x pp + p) x cp + c) x tp + t.
  StepSpec s = dense_step(true);
  s.layout.cp = 2;
  s.global_batch = 8;
  const StepShape shape = shape_of("gpt-1.7b", s);
  EXPECT_EQ(shape.stage_rank(1), 4);
  EXPECT_EQ(shape.tensor_group(1), (std::vector<int>{4, 5}));
  EXPECT_EQ(shape.context_group(1), (std::vector<int>{4, 6}));
  EXPECT_EQ(shape.data_group(1), (std::vector<int>{4, 6, 12, 14}));
  EXPECT_EQ(shape.stage_group(1), (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_EQ(shape.stage_of(12), 1);
  EXPECT_EQ(shape.stage_of(11), 0);
}

TEST(RankOrder, DualPipeMirrorGroupsAreSorted) {
  // GPT-1.7B on 8 GPUs: tp 1, pp 4, dp 2; stage 1 and its mirror 2 hold the same parts.
  StepSpec s = testing::small_gpt_step_under(PipelineSchedule::kDualPipe);
  s.layout.tp = 1;
  s.layout.gpus = 8;
  s.global_batch = 16;
  s.tp_pp_dp_mapping = true;
  const StepShape shape = shape_of("gpt-1.7b", s);
  EXPECT_EQ(shape.data_group(1), (std::vector<int>{1, 2, 5, 6}));
  const auto model = testing::model_preset("gpt-1.7b");
  EXPECT_GT(simulate_training_step(model, testing::a100_cluster(8), s).report.step_ns, 0);
}

TEST(RankOrder, MoeStepRunsInTheOrder) {
  // Qwen3-30B-A3B folded to etp 1 x ep 2 = tp x cp: its all-to-alls, expert reductions and
  // ZeRO-1 gathers over the tp-ep-pp-dp groups.
  StepSpec s = testing::folded_moe_step();
  s.zero_stage = 1;
  const auto model = testing::model_preset("qwen3-30b-a3b");
  const SimulatedStep by_default = simulate_training_step(model, testing::a100_cluster(16), s);
  s.tp_pp_dp_mapping = true;
  const SimulatedStep mapped = simulate_training_step(model, testing::a100_cluster(16), s);
  EXPECT_GT(mapped.report.step_ns, 0);
  EXPECT_EQ(mapped.graph.graph.num_tasks(), by_default.graph.graph.num_tasks());
  EXPECT_EQ(mapped.report.peak_memory_bytes, by_default.report.peak_memory_bytes);
  const auto reduce = mapped.graph.graph.find("mb1.L0.bwd.expert.grad.reduce", -1);
  ASSERT_TRUE(reduce.has_value());
  const auto& w = std::get<CollectiveWork>(mapped.graph.graph.task(*reduce).work);
  EXPECT_EQ(mapped.graph.graph.group(w.group), (std::vector<int>{0, 4, 8, 12}));  // etp x ep x pp apart
}

TEST(RankOrder, MoeLayersNeedTheExpertsStagesToBeTheDenseOnes) {
  StepSpec s = testing::small_moe_step();  // tp 2, ep 4: etp x ep = 8, tp x cp = 2
  s.tp_pp_dp_mapping = true;
  EXPECT_THAT(testing::step_error_of(s, "qwen3-30b-a3b"),
              ::testing::HasSubstr("--use-tp-pp-dp-mapping with MoE layers and --pp > 1 needs --etp x --ep = --tp x --cp"));
  s.tp_pp_dp_mapping = false;
  EXPECT_EQ(testing::step_error_of(s, "qwen3-30b-a3b"), "");
  // Without pipelining every pipeline group is one rank: any expert layout runs in either order.
  s.tp_pp_dp_mapping = true;
  s.layout.pp = 1;
  s.layout.gpus = 8;
  EXPECT_EQ(testing::step_error_of(s, "qwen3-30b-a3b"), "");
}

TEST(RankOrder, WithoutPipeliningTheOrderChangesNothing) {
  StepSpec s = testing::small_gpt_step();
  s.layout.pp = 1;
  s.layout.gpus = 8;
  s.global_batch = 8;
  const auto model = testing::model_preset("gpt-1.7b");
  const SimulatedStep a = simulate_training_step(model, testing::a100_cluster(8), s);
  s.tp_pp_dp_mapping = true;
  const SimulatedStep b = simulate_training_step(model, testing::a100_cluster(8), s);
  EXPECT_EQ(a.report.step_ns, b.report.step_ns);
  EXPECT_EQ(a.report.peak_memory_bytes, b.report.peak_memory_bytes);
}

TimeNs duration(const SimulatedStep& sim, const std::string& id) {
  const auto task = sim.graph.graph.find(id, -1);
  EXPECT_TRUE(task.has_value()) << id;
  if (!task) return 0;
  const TaskRecord& r = sim.run.trace.records[*task];
  return r.end_ns - r.start_ns;
}

// GPT-1.7B on two 8-GPU nodes, tp 1, pp 2, dp 8: in the default order each stage fills a node, its
// gradient all-reduces on NVLink, the pipeline's transfers and the tied embedding's all-reduce
// across the fabric; in tp-pp-dp order each node holds whole pipelines, the other way round.
TEST(RankOrder, MovingTheReplicasAcrossNodesTradesNvlinkBetweenTheGroups) {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = 1;
  s.layout.pp = 2;
  s.global_batch = 32;
  s.seq = 1024;
  const auto model = testing::model_preset("gpt-1.7b");
  const SimulatedStep by_stage = simulate_training_step(model, testing::a100_cluster(16), s);
  s.tp_pp_dp_mapping = true;
  const SimulatedStep by_pipeline = simulate_training_step(model, testing::a100_cluster(16), s);
  const auto nodes = [](const std::vector<int>& g) { return g.back() / 8 - g.front() / 8 + 1; };
  EXPECT_EQ(nodes(by_stage.graph.shape.data_group(0)), 1);
  EXPECT_EQ(nodes(by_pipeline.graph.shape.data_group(0)), 2);
  // A layer's gradient all-reduce over 8 ranks: one node's NVLink, or 4 + 4 across the fabric.
  EXPECT_GT(duration(by_pipeline, "mb3.L1.bwd.grad.reduce"), duration(by_stage, "mb3.L1.bwd.grad.reduce"));
  // The tied embedding's all-reduce between the first and the last stage, and the pipeline's
  // transfers: across the fabric, or on one node's NVLink.
  EXPECT_LT(duration(by_pipeline, "embedding.grad.allreduce"), duration(by_stage, "embedding.grad.allreduce"));
  EXPECT_LT(duration(by_pipeline, "mb0.p2p.fwd.part1.s0-s1"), duration(by_stage, "mb0.p2p.fwd.part1.s0-s1"));
  // The same work and memory either way.
  EXPECT_EQ(by_pipeline.report.peak_memory_bytes, by_stage.report.peak_memory_bytes);
  EXPECT_EQ(by_pipeline.graph.graph.num_tasks(), by_stage.graph.graph.num_tasks());
}

}  // namespace
}  // namespace moesim
