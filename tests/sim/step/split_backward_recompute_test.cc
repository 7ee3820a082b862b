// Recomputation with the schedules that split a backward into its input-gradient (B) and
// weight-gradient (W) passes: ZB-H1, DualPipe and DualPipeV. What recomputation re-creates before
// a B pass is read by its W pass too, so the step keeps it until the W pass ends (DeepSeek-V3 ran
// DualPipe with selective recomputation). The step pays the recomputed work, its peak stays within
// the closed form (which counts every in-flight chunk's recomputed tensors), and recomputing still
// lowers the first stage's peak, whose in-flight microbatches mostly wait for their B pass.
#include <gtest/gtest.h>

#include <string>

#include "sim/search/layout_planner.h"
#include "sim/step/step_shape.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr auto& cluster = testing::a100_cluster;

ModelSpec gpt() { return testing::model_preset("gpt-1.7b"); }

SimulatedStep simulate(PipelineSchedule schedule, Recompute recompute) {
  StepSpec s = testing::small_gpt_step();
  s.schedule = schedule;
  s.recompute = recompute;  // selective: core_attn, the default module
  return simulate_training_step(gpt(), cluster(16), s);
}

TEST(SplitBackwardRecompute, PaysTheRecomputedWorkAndStaysWithinTheClosedForm) {
  for (const PipelineSchedule schedule :
       {PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipe, PipelineSchedule::kDualPipeV}) {
    SCOPED_TRACE(to_string(schedule));
    const SimulatedStep none = simulate(schedule, Recompute::kNone);
    for (const Recompute recompute : {Recompute::kFull, Recompute::kSelective}) {
      SCOPED_TRACE(to_string(recompute));
      const SimulatedStep sim = simulate(schedule, recompute);
      EXPECT_GT(sim.report.step_ns, none.report.step_ns);
      StepSpec s = testing::small_gpt_step();
      s.schedule = schedule;
      s.recompute = recompute;
      const StepShape shape = derive_step_shape(gpt(), cluster(16), s);
      EXPECT_LE(sim.report.peak_memory_bytes, search::closed_form_peak_bytes(gpt(), s, shape));
      // Every recompute task runs before a weight-gradient task of its layer reads what it made:
      // the recomputed buffers live until the W pass, so none is freed before its W pass starts.
      const TaskGraph& g = sim.graph.graph;
      for (TaskIndex i = 0; i < g.num_tasks(); ++i)
        for (TaskIndex p : g.predecessors(i))
          ASSERT_LE(sim.run.trace.records[p].end_ns, sim.run.trace.records[i].start_ns) << g.task(i).id;
    }
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
