// The whole training step (sim/step): its layout rules, its invariants (dependencies, the step
// between the busiest stage's compute and the sum of all task times), its memory against the
// closed-form stage activations, and what the schedules change.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/memory/activations.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr auto& preset = testing::model_preset;
constexpr auto& cluster = testing::a100_cluster;
std::string error_of(const StepSpec& spec, const std::string& model = "gpt-1.7b") {
  return testing::step_error_of(spec, model);
}

constexpr auto& small_step = testing::small_gpt_step;

int count_tasks(const TaskGraph& g, const std::string& id_part) {
  int n = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) n += g.task(i).id.find(id_part) != std::string::npos;
  return n;
}

TEST(TrainingStepLayout, RefusesEachRuleNamingTheFlag) {
  StepSpec s = small_step();
  s.layout.tp = 5;
  s.layout.gpus = 40;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--tp 5 does not divide the 24 attention heads"));
  s = small_step();
  s.layout.pp = 8;
  s.layout.vpp = 2;
  s.layout.gpus = 32;
  s.global_batch = 16;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--pp x --vpp = 16 does not divide the 24 layers"));
  s = small_step();
  s.global_batch = 15;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--global-batch 15 is not divisible by --micro-batch x data-parallel size = 1 x 2"));
  s = small_step();
  s.layout.pp = 1;
  s.layout.vpp = 2;
  s.layout.tp = 8;
  s.layout.gpus = 8;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--vpp 2 needs --pp > 1"));
  s = small_step();
  s.layout.cp = 2;
  s.layout.gpus = 32;
  s.seq = 1026;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--seq 1026 is not divisible by 2 x --cp = 4"));
  s = small_step();
  s.layout.tp = 1;
  s.layout.gpus = 8;
  s.sequence_parallel = true;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--sequence-parallel needs --tp > 1"));
  s = small_step();
  s.layout.ep = 2;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--ep 2 needs a model with MoE layers"));
  s = small_step();
  s.schedule = PipelineSchedule::kInterleaved;
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("--schedule interleaved: "));
  s = small_step();
  s.layout.gpus = 24;
  EXPECT_THROW(
      {
        try {
          build_step_graph(preset("gpt-1.7b"), cluster(16), s);
        } catch (const InputError& e) {
          EXPECT_THAT(e.what(), ::testing::HasSubstr("differs from the cluster's 16"));
          throw;
        }
      },
      InputError);
}

TEST(TrainingStepLayout, DerivesDataParallelSizeAndMicrobatches) {
  const StepShape shape = derive_step_shape(preset("gpt-1.7b"), cluster(16), small_step());
  EXPECT_EQ(shape.dp, 2);
  EXPECT_EQ(shape.pipeline.microbatches, 8);
  EXPECT_EQ(shape.num_parts(), 4);
  EXPECT_EQ(shape.parts[3].first_layer, 18);
  EXPECT_EQ(shape.stage_rank(3), 12);
  EXPECT_EQ(shape.tensor_group(1), (std::vector<int>{4, 5}));
  EXPECT_EQ(shape.data_group(1), (std::vector<int>{4, 6}));
}

TEST(TrainingStep, RespectsDependenciesAndBoundsTheStepByItsTasks) {
  for (const PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB,
                                          PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipe,
                                          PipelineSchedule::kDualPipeV}) {
    StepSpec s = small_step();
    s.schedule = schedule;
    const SimulatedStep sim = simulate_training_step(preset("gpt-1.7b"), cluster(16), s);
    const TaskGraph& g = sim.graph.graph;
    TimeNs sum = 0;
    for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
      const TaskRecord& r = sim.run.trace.records[i];
      ASSERT_GE(r.end_ns, r.start_ns);
      sum += r.end_ns - r.start_ns;
      for (TaskIndex p : g.predecessors(i)) ASSERT_LE(sim.run.trace.records[p].end_ns, r.start_ns) << g.task(i).id;
    }
    TimeNs busiest = 0;
    for (const StageReport& st : sim.report.stages) busiest = std::max(busiest, st.compute_busy_ns);
    EXPECT_GE(sim.report.step_ns, busiest) << to_string(schedule);
    EXPECT_LE(sim.report.step_ns, sum) << to_string(schedule);
    EXPECT_GT(sim.report.bubble_fraction, 0) << to_string(schedule);
  }
}

TEST(TrainingStep, OneTransferEachWayPerMicrobatchAndStageBoundary) {
  StepSpec s = small_step();
  s.layout.vpp = 2;  // interleaved: 8 parts, 7 boundaries
  const SimulatedStep sim = simulate_training_step(preset("gpt-1.7b"), cluster(16), s);
  int transfers = 0;
  for (TaskIndex i = 0; i < sim.graph.graph.num_tasks(); ++i)
    transfers += sim.graph.graph.task(i).stream == StreamClass::kCommPipeline;
  EXPECT_EQ(transfers, 2 * 8 * 7);
}

TEST(TrainingStep, InterleavingShrinksTheBubble) {
  StepSpec plain = small_step();
  StepSpec interleaved = small_step();
  interleaved.layout.vpp = 2;
  const auto a = simulate_training_step(preset("gpt-1.7b"), cluster(16), plain).report;
  const auto b = simulate_training_step(preset("gpt-1.7b"), cluster(16), interleaved).report;
  EXPECT_LT(b.bubble_fraction, a.bubble_fraction);
  EXPECT_LT(b.step_ns, a.step_ns);
}

// The simulated peak of each stage is its model states plus the closed-form activations of its
// in-flight microbatches (sim/memory/activations.h), to the byte without recomputation. With full
// recomputation the closed form is an upper bound: it adds the largest layer's recomputed tensors
// to every in-flight microbatch's kept ones, while on the last stage the microbatch being
// recomputed has already freed its output layer's tensors.
TEST(TrainingStep, PeakMemoryIsModelStatesPlusTheInFlightActivations) {
  const ModelSpec model = preset("gpt-1.7b");
  for (const PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB}) {
    for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
      StepSpec s = small_step();
      s.schedule = schedule;
      s.recompute = recompute;
      const SimulatedStep sim = simulate_training_step(model, cluster(16), s);
      ActivationLayout layout;
      layout.micro_batch = 1;
      layout.seq = s.seq;
      layout.tp = 2;
      layout.recompute = recompute;
      for (int stage = 0; stage < 4; ++stage) {
        const StageActivations act =
            stage_activations(model, layout, 1, PipelineLayout{schedule, 4, 1, 8, {}}, stage);
        const StageReport& st = sim.report.stages[static_cast<std::size_t>(stage)];
        const std::string where =
            std::string(to_string(schedule)) + " recompute " + std::string(to_string(recompute)) + " stage " +
            std::to_string(stage);
        if (recompute == Recompute::kNone) {
          EXPECT_EQ(st.peak_memory_bytes, st.model_state_bytes + act.bytes()) << where;
        } else {
          EXPECT_LE(st.peak_memory_bytes, st.model_state_bytes + act.bytes()) << where;
          EXPECT_GE(st.peak_memory_bytes, st.model_state_bytes + act.kept_bytes) << where;
          if (stage < 3) {
            EXPECT_EQ(st.peak_memory_bytes, st.model_state_bytes + act.bytes()) << where;
          }
        }
      }
    }
  }
}

TEST(TrainingStep, SelectiveRecomputeAndSequenceParallelismBeatFullRecompute) {
  StepSpec full = small_step();
  full.recompute = Recompute::kFull;
  full.attention = AttentionKernel::kUnfused;
  StepSpec selective = full;
  selective.recompute = Recompute::kSelective;
  selective.sequence_parallel = true;
  const auto a = simulate_training_step(preset("gpt-1.7b"), cluster(16), full).report;
  const auto b = simulate_training_step(preset("gpt-1.7b"), cluster(16), selective).report;
  EXPECT_LT(b.step_ns, a.step_ns);
  EXPECT_GT(b.model_tflops_per_gpu, a.model_tflops_per_gpu);
}

TEST(TrainingStep, IsDeterministic) {
  const auto a = simulate_training_step(preset("gpt-1.7b"), cluster(16), small_step()).report;
  const auto b = simulate_training_step(preset("gpt-1.7b"), cluster(16), small_step()).report;
  EXPECT_EQ(a.step_ns, b.step_ns);
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
}

constexpr auto& moe_step = testing::small_moe_step;

TEST(TrainingStepMoe, SixAllToAllsPerLayerAndMicrobatchOverTheExpertGroup) {
  const SimulatedStep sim = simulate_training_step(preset("qwen3-30b-a3b"), cluster(16), moe_step());
  const TaskGraph& g = sim.graph.graph;
  int a2a = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Task& t = g.task(i);
    if (t.stage != "a2a") continue;
    ++a2a;
    const auto& w = std::get<CollectiveWork>(t.work);
    EXPECT_EQ(w.op, CollectiveOp::kAllToAll);
    EXPECT_EQ(g.group(w.group).size(), 4u) << t.id;
  }
  // layers x microbatches per pipeline x (dispatch, its probabilities, combine, their gradients)
  EXPECT_EQ(a2a, 48 * 2 * 6);
  // Expert gradients reduce over the experts' data-parallel replicas: dp / ep = 1 here, so none.
  EXPECT_EQ(count_tasks(g, "expert.grad.reduce"), 0);
  EXPECT_GT(count_tasks(g, "L0.bwd.grad.reduce"), 0);
}

TEST(TrainingStepMoe, PeakMemoryIsModelStatesPlusTheInFlightActivations) {
  const ModelSpec model = preset("qwen3-30b-a3b");
  const StepSpec s = moe_step();
  const SimulatedStep sim = simulate_training_step(model, cluster(16), s);
  ActivationLayout layout;
  layout.seq = s.seq;
  layout.tp = 2;
  layout.sequence_parallel = true;
  for (int stage = 0; stage < 2; ++stage) {
    const StageActivations act = stage_activations(model, layout, 4, PipelineLayout{PipelineSchedule::kOneFOneB, 2, 1, 2, {}}, stage);
    const StageReport& st = sim.report.stages[static_cast<std::size_t>(stage)];
    EXPECT_EQ(st.peak_memory_bytes, st.model_state_bytes + act.bytes()) << "stage " << stage;
  }
}

TEST(TrainingStepMoe, ExpertGradientsReduceOverTheExpertDataGroup) {
  StepSpec s = moe_step();
  s.layout.ep = 2;  // dp 4 / ep 2: two replicas of each expert
  const SimulatedStep sim = simulate_training_step(preset("qwen3-30b-a3b"), cluster(16), s);
  const TaskGraph& g = sim.graph.graph;
  // After the last microbatch's backward.
  const auto reduce = g.find("mb1.L0.bwd.expert.grad.reduce", -1);;
  ASSERT_TRUE(reduce.has_value());
  const auto& w = std::get<CollectiveWork>(g.task(*reduce).work);
  EXPECT_EQ(g.group(w.group), (std::vector<int>{0, 4}));  // stage 0's rank and its replica (stride ep x tp)
}

TEST(TrainingStep, ContextParallelismRunsTheCoreAroundARing) {
  StepSpec s = small_step();
  s.layout.cp = 2;
  s.layout.gpus = 32;  // tp 2 x cp 2 x pp 4 x dp 2
  const SimulatedStep sim = simulate_training_step(preset("gpt-1.7b"), cluster(32), s);
  const TaskGraph& g = sim.graph.graph;
  // One ring step (cp - 1) per layer, microbatch and pass; each block of the core after the first
  // waits for its step.
  EXPECT_EQ(count_tasks(g, "cp.ring"), 24 * 8 * 2);
  const auto step = g.find("mb0.L0.fwd.cp.ring1", -1);
  const auto block = g.find("mb0.L0.fwd.core.block1", 0);
  ASSERT_TRUE(step && block);
  const auto preds = g.predecessors(*block);
  EXPECT_NE(std::find(preds.begin(), preds.end(), *step), preds.end());
  const auto& w = std::get<CollectiveWork>(g.task(*step).work);
  EXPECT_EQ(g.group(w.group), (std::vector<int>{0, 2}));
  EXPECT_EQ(w.pair_bytes(0, 1), w.pair_bytes(1, 0));
  EXPECT_EQ(w.pair_bytes(0, 0), 0);
}

TEST(TrainingStep, ZeroThreeGathersEachLayersWeightsBeforeItsPasses) {
  StepSpec s = small_step();
  s.zero_stage = 3;
  const SimulatedStep sim = simulate_training_step(preset("gpt-1.7b"), cluster(16), s);
  const TaskGraph& g = sim.graph.graph;
  // Forward and backward of every layer of every microbatch (8 per pipeline), over dp = 2.
  EXPECT_EQ(count_tasks(g, ".weights.allgather"), 24 * 8 * 2);
  const auto gather = g.find("mb0.L0.fwd.weights.allgather", -1);
  const auto ln1 = g.find("mb0.L0.fwd.ln1", 0);
  ASSERT_TRUE(gather && ln1);
  const auto preds = g.predecessors(*ln1);
  EXPECT_NE(std::find(preds.begin(), preds.end(), *gather), preds.end());
  EXPECT_EQ(g.group(std::get<CollectiveWork>(g.task(*gather).work).group), (std::vector<int>{0, 2}));
  // No gather of whole weights after the optimizer: they stay sharded.
  EXPECT_FALSE(g.find("stage0.bwd.weights.allgather", -1).has_value());
  // Sharded gradients: every microbatch's backward reduce-scatters each layer's, where ZeRO-1's
  // whole gradient buffer accumulates and is reduced once, after the last microbatch (and each of
  // the 2 stages reduces the rest, its embedding or head, once).
  EXPECT_EQ(count_tasks(g, ".grad.reduce"), 24 * 8 + 2);
  StepSpec one = small_step();
  one.zero_stage = 1;
  const SimulatedStep z1 = simulate_training_step(preset("gpt-1.7b"), cluster(16), one);
  EXPECT_TRUE(z1.graph.graph.find("stage0.bwd.weights.allgather", -1));
  EXPECT_EQ(count_tasks(z1.graph.graph, ".grad.reduce"), 24 + 2);
  StepSpec two = small_step();
  two.zero_stage = 2;
  EXPECT_EQ(count_tasks(simulate_training_step(preset("gpt-1.7b"), cluster(16), two).graph.graph, ".grad.reduce"), 24 * 8 + 2);
}

TEST(TrainingStepSplit, PartLayersGiveAnUnevenSplitWithTheSameModelStates) {
  const ModelSpec model = preset("gpt-1.7b");
  StepSpec even = small_step();
  StepSpec uneven = small_step();
  uneven.part_layers = {5, 7, 7, 5};
  const auto a = simulate_training_step(model, cluster(16), even).report;
  const auto b = simulate_training_step(model, cluster(16), uneven).report;
  std::int64_t states_a = 0, states_b = 0;
  for (int s = 0; s < 4; ++s) {
    states_a += a.stages[static_cast<std::size_t>(s)].model_state_bytes;
    states_b += b.stages[static_cast<std::size_t>(s)].model_state_bytes;
  }
  EXPECT_EQ(states_a, states_b);
  EXPECT_EQ(b.stages[0].layers, 5);
  EXPECT_EQ(b.stages[1].layers, 7);
  uneven.part_layers = {5, 7, 7, 6};
  EXPECT_THAT(error_of(uneven), ::testing::HasSubstr("--part-layers sums to 25 layers; GPT-1.7B has 24"));
  uneven.part_layers = {12, 12};
  EXPECT_THAT(error_of(uneven), ::testing::HasSubstr("--part-layers lists 2 parts; --pp x --vpp = 4"));
}

// DeepSeek-V3: 61 layers (3 dense), MLA, 256 experts, one multi-token prediction module on the
// last stage, split 31 + 30 over two stages.
TEST(TrainingStepMoe, DeepSeekV3RunsItsMtpModuleOnTheLastStage) {
  StepSpec s;
  s.layout.gpus = 64;
  s.layout.pp = 2;
  s.layout.ep = 8;
  s.global_batch = 32;
  s.seq = 512;
  s.part_layers = {31, 30};
  const SimulatedStep sim = simulate_training_step(preset("deepseek-v3"), cluster(64), s);
  const TaskGraph& g = sim.graph.graph;
  const auto proj = g.find("mb0.mtp0.fwd.proj", s.layout.gpus / 2);
  ASSERT_TRUE(proj.has_value());
  EXPECT_TRUE(g.find("mb0.L61.fwd.experts.fc1", s.layout.gpus / 2).has_value());  // the module's MoE layer
  EXPECT_TRUE(g.find("mb0.L0.fwd.fc1", 0).has_value());                          // a dense layer
  EXPECT_FALSE(g.find("mb0.L0.fwd.experts.fc1", 0).has_value());
  EXPECT_GT(sim.report.step_ns, 0);
}

}  // namespace
}  // namespace moesim
