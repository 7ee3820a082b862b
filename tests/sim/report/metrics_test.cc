// Step metrics on hand-made traces: union lengths, busy and exposed time, overlap.
#include "sim/report/metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

Task make_task(std::string id, StreamClass s, Pass pass, std::string stage) {
  Task t;
  t.id = std::move(id);
  t.rank = 0;
  t.stream = s;
  t.pass = pass;
  t.stage = std::move(stage);
  t.work = HostWork{1};
  return t;
}

TEST(UnionLength, MergesOverlapsAndIgnoresEmpty) {
  EXPECT_EQ(union_length({}), 0);
  EXPECT_EQ(union_length({{0, 10}, {5, 15}, {20, 30}, {30, 30}}), 25);
  EXPECT_EQ(union_length({{20, 30}, {0, 10}, {10, 20}}), 30);
  EXPECT_EQ(union_length({{0, 100}, {10, 20}}), 100);
}

// compute: gate [0,10) fc1 [30,70); comm: dispatch [10,50). Backward: bwd.fc1 [70,100).
// dispatch overlaps fc1 during [30,50).
TEST(StepMetrics, BusyExposedAndOverlap) {
  TaskGraph g(1, {0});
  const TaskIndex gate = g.add_task(make_task("gate", StreamClass::kCompute, Pass::kForward, "gate"));
  Task d = make_task("dispatch", StreamClass::kCommDispatch, Pass::kForward, "dispatch");
  d.work = CollectiveWork{CollectiveOp::kAllToAll, g.add_group({0}), 1};
  const TaskIndex disp = g.add_task(d);
  const TaskIndex fc1 = g.add_task(make_task("fc1", StreamClass::kCompute, Pass::kForward, "fc1"));
  const TaskIndex bfc1 = g.add_task(make_task("bfc1", StreamClass::kCompute, Pass::kBackward, "fc1"));
  Trace tr;
  tr.records.resize(4);
  tr.records[gate] = {0, 0, 10};
  tr.records[disp] = {10, 10, 50};
  tr.records[fc1] = {0, 30, 70};
  tr.records[bfc1] = {70, 70, 100};
  const StepMetrics m = compute_step_metrics(g, tr);
  EXPECT_EQ(m.step_ns, 100);
  EXPECT_EQ(m.forward_ns, 70);
  EXPECT_EQ(m.backward_ns, 30);
  EXPECT_EQ(m.stages.at("fwd.gate").busy_ns, 10);
  EXPECT_EQ(m.stages.at("fwd.gate").exposed_ns, 10);
  EXPECT_EQ(m.stages.at("fwd.dispatch").busy_ns, 40);
  EXPECT_EQ(m.stages.at("fwd.dispatch").exposed_ns, 20);  // [10,30) alone
  EXPECT_EQ(m.stages.at("fwd.fc1").busy_ns, 40);
  EXPECT_EQ(m.stages.at("fwd.fc1").exposed_ns, 20);       // [50,70) alone
  EXPECT_EQ(m.stages.at("bwd.fc1").exposed_ns, 30);
  EXPECT_EQ(m.compute_busy_ns, 80);
  EXPECT_EQ(m.comm_busy_ns, 40);
  EXPECT_EQ(m.overlap_ns, 20);
  EXPECT_DOUBLE_EQ(m.overlap_fraction, 0.5);  // 20 of min(80, 40) hidden
  EXPECT_EQ(m.sum_task_ns, 10 + 40 + 40 + 30);
  const std::vector<std::string> order = {"fwd.gate", "fwd.dispatch", "fwd.fc1", "bwd.fc1"};
  EXPECT_EQ(m.stage_order, order);
}

TEST(StepMetrics, CriticalRankIsTheLastToFinish) {
  TaskGraph g(2, {0, 1});
  Task a = make_task("x", StreamClass::kCompute, Pass::kForward, "fc1");
  const TaskIndex a0 = g.add_task(a);
  a.rank = 1;
  const TaskIndex a1 = g.add_task(a);
  Trace tr;
  tr.records.resize(2);
  tr.records[a0] = {0, 0, 10};
  tr.records[a1] = {0, 0, 25};
  EXPECT_EQ(compute_step_metrics(g, tr).rank, 1);
  EXPECT_EQ(compute_step_metrics(g, tr).step_ns, 25);
}

// A whole step's report asks for one rank per pipeline stage in one walk over the tasks: each
// rank's figures must be those a walk of its own gives (GPT-1.7B, tp 2, pp 4, dp 2, MoE-free but
// with tensor-parallel and data-parallel collectives on several ranks).
TEST(StepMetrics, ManyRanksInOneWalkEqualOneWalkEach) {
  const SimulatedStep sim = simulate_training_step(testing::model_preset("gpt-1.7b"),
                                                   testing::cluster_preset("dgx-a100-80gb-hdr", 16), testing::small_gpt_step());
  // The simulated rank of each stage (the others are represented by them), asked out of order.
  const StepShape& shape = sim.graph.shape;
  const std::vector<int> ranks{shape.stage_rank(2), shape.stage_rank(0), shape.stage_rank(3), shape.stage_rank(1)};
  const std::vector<StepMetrics> all = compute_ranks_metrics(sim.graph.graph, sim.run.trace, ranks);
  ASSERT_EQ(all.size(), ranks.size());
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    const StepMetrics one = compute_rank_metrics(sim.graph.graph, sim.run.trace, ranks[k]);
    const StepMetrics& m = all[k];
    EXPECT_EQ(m.rank, ranks[k]);
    EXPECT_EQ(m.step_ns, one.step_ns);
    EXPECT_EQ(m.forward_ns, one.forward_ns);
    EXPECT_EQ(m.backward_ns, one.backward_ns);
    EXPECT_EQ(m.compute_busy_ns, one.compute_busy_ns);
    EXPECT_EQ(m.comm_busy_ns, one.comm_busy_ns);
    EXPECT_EQ(m.overlap_ns, one.overlap_ns);
    EXPECT_EQ(m.sum_task_ns, one.sum_task_ns);
    EXPECT_EQ(m.stage_order, one.stage_order);
    ASSERT_EQ(m.stages.size(), one.stages.size());
    for (const auto& [key, st] : one.stages) {
      EXPECT_EQ(m.stages.at(key).busy_ns, st.busy_ns) << key;
      EXPECT_EQ(m.stages.at(key).exposed_ns, st.exposed_ns) << key;
      EXPECT_EQ(m.stages.at(key).num_tasks, st.num_tasks) << key;
    }
    EXPECT_GT(m.stages.size(), 0u);
  }
  // The stages differ (the first and last hold the embedding and the head).
  EXPECT_NE(all[0].compute_busy_ns + all[0].sum_task_ns, all[1].compute_busy_ns + all[1].sum_task_ns);
}

}  // namespace
}  // namespace moesim
