// Recomputation with the schedules that split a backward into its input-gradient (B) and
// weight-gradient (W) passes: ZB-H1, DualPipe and DualPipeV. What recomputation re-creates before
// a B pass is read by its W pass too, so the step keeps it until the W pass ends (DeepSeek-V3 ran
// DualPipe with selective recomputation). The step pays the recomputed work, each recompute buffer
// lives from its B pass to its W pass, the peak stays within the closed form (which holds a chunk's
// recomputed tensors from its B pass to its W pass), and recomputing still lowers the first stage's
// peak, simulated and closed-form, whose in-flight microbatches mostly wait for their B pass.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sim/memory/activations.h"
#include "sim/search/layout_planner.h"
#include "sim/step/step_shape.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr auto& cluster = testing::a100_cluster;

ModelSpec gpt() { return testing::model_preset("gpt-1.7b"); }

// Selective recomputation re-runs core_attn, the default module.
SimulatedStep simulate(PipelineSchedule schedule, Recompute recompute) {
  return simulate_training_step(gpt(), cluster(16), testing::small_gpt_step_under(schedule, recompute));
}

void expect_recomputed_until_the_weight_pass(const SimulatedStep& sim);

TEST(SplitBackwardRecompute, PaysTheRecomputedWorkAndStaysWithinTheClosedForm) {
  for (const PipelineSchedule schedule :
       {PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipe, PipelineSchedule::kDualPipeV}) {
    SCOPED_TRACE(to_string(schedule));
    const SimulatedStep none = simulate(schedule, Recompute::kNone);
    for (const Recompute recompute : {Recompute::kFull, Recompute::kSelective}) {
      SCOPED_TRACE(to_string(recompute));
      const SimulatedStep sim = simulate(schedule, recompute);
      EXPECT_GT(sim.report.step_ns, none.report.step_ns);
      const StepSpec s = testing::small_gpt_step_under(schedule, recompute);
      const StepShape shape = derive_step_shape(gpt(), cluster(16), s);
      EXPECT_LE(sim.report.peak_memory_bytes, search::closed_form_peak_bytes(gpt(), s, shape));
      expect_recomputed_until_the_weight_pass(sim);
    }
  }
}

// Every recompute buffer is allocated once, in a B pass (split) or a whole backward, and freed
// once, by the same microbatch's W pass (split) or that whole backward, after it was allocated.
void expect_recomputed_until_the_weight_pass(const SimulatedStep& sim) {
  const TaskGraph& g = sim.graph.graph;
  const auto pass_of = [&](TaskIndex t) -> const PassSpan& {
    for (const PassSpan& p : sim.graph.passes)
      if (t >= p.first && t < p.end) return p;
    ADD_FAILURE() << "task " << g.task(t).id << " in no pass";
    return sim.graph.passes.front();
  };
  std::map<BufferId, std::vector<TaskIndex>> allocs, frees;
  for (TaskIndex t = 0; t < g.num_tasks(); ++t) {
    for (BufferId b : g.task(t).allocates) allocs[b].push_back(t);
    for (BufferId b : g.task(t).frees) frees[b].push_back(t);
  }
  int split = 0, checked = 0;
  for (BufferId b = 0; b < g.num_buffers(); ++b) {
    const std::string& name = g.buffer(b).name;
    if (name.size() < 10 || name.compare(name.size() - 10, 10, ".recompute") != 0) continue;
    ASSERT_EQ(allocs[b].size(), 1u) << name;
    ASSERT_EQ(frees[b].size(), 1u) << name;
    const PassSpan& made = pass_of(allocs[b][0]);
    const PassSpan& freed = pass_of(frees[b][0]);
    EXPECT_EQ(made.action.microbatch, freed.action.microbatch) << name;
    EXPECT_LE(sim.run.trace.records[allocs[b][0]].start_ns, sim.run.trace.records[frees[b][0]].end_ns) << name;
    if (made.action.work == PipeWork::kBackwardInput) {
      EXPECT_EQ(freed.action.work, PipeWork::kBackwardWeight) << name;
      ++split;
    } else {
      EXPECT_EQ(made.action.work, PipeWork::kBackward) << name;
      EXPECT_EQ(&made, &freed) << name;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
  EXPECT_GT(split, 0);
}

// An MoE model (Qwen3-30B-A3B, 2 microbatches over 2 stages), its experts' activation and the
// norms recomputed: the same lifetimes through the MoE layers' dispatcher and experts.
TEST(SplitBackwardRecompute, MoeLayersKeepWhatTheyRecomputedUntilTheWeightPass) {
  for (const PipelineSchedule schedule : {PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipeV}) {
    SCOPED_TRACE(to_string(schedule));
    StepSpec s = testing::small_moe_step();
    s.schedule = schedule;
    s.global_batch = schedule == PipelineSchedule::kDualPipeV ? 16 : 8;  // DualPipeV: at least 2 x pp microbatches
    s.recompute = Recompute::kSelective;
    s.recompute_modules = RecomputeModules{false, true, true};  // layernorm, moe_act
    const ModelSpec qwen = testing::model_preset("qwen3-30b-a3b");
    const ClusterSpec h100 = testing::cluster_preset("dgx-h100-ndr", 16);
    const SimulatedStep sim = simulate_training_step(qwen, h100, s);
    expect_recomputed_until_the_weight_pass(sim);
    EXPECT_LE(sim.report.peak_memory_bytes,
              search::closed_form_peak_bytes(qwen, s, derive_step_shape(qwen, h100, s)));
  }
}

// The closed form sees the saving too (so the layout planner can pick recomputation to fit a
// split schedule): what a microbatch waiting for its B pass keeps is only what recomputation does
// not re-create.
TEST(SplitBackwardRecompute, TheClosedFormSeesTheSavingOnTheFirstStage) {
  for (const PipelineSchedule schedule :
       {PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipe, PipelineSchedule::kDualPipeV}) {
    const auto closed_stage0 = [&](Recompute recompute) {
      ActivationLayout layout;
      layout.micro_batch = 1;
      layout.seq = 1024;
      layout.tp = 2;
      layout.recompute = recompute;
      return stage_activations(gpt(), layout, 1, PipelineLayout{schedule, 4, 1, 8, {}}, 0).bytes();
    };
    EXPECT_LT(closed_stage0(Recompute::kFull), closed_stage0(Recompute::kNone)) << to_string(schedule);
  }
}

TEST(SplitBackwardRecompute, FullRecomputationStillLowersTheFirstStagesPeak) {
  for (const PipelineSchedule schedule : {PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipeV}) {
    const SimulatedStep none = simulate(schedule, Recompute::kNone);
    const SimulatedStep full = simulate(schedule, Recompute::kFull);
    EXPECT_LT(full.report.stages[0].peak_memory_bytes, none.report.stages[0].peak_memory_bytes) << to_string(schedule);
    // No stage peaks higher than without recomputation: what is recomputed replaces what was kept.
    for (std::size_t st = 0; st < full.report.stages.size(); ++st)
      EXPECT_LE(full.report.stages[st].peak_memory_bytes, none.report.stages[st].peak_memory_bytes)
          << to_string(schedule) << " stage " << st;
  }
}

}  // namespace
}  // namespace moesim
