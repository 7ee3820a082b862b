// Stream and event plan: a hand-solved graph pins the reduction, and on the builder's graphs every
// cross-stream dependency is enforced by the plan while no single wait can be dropped.
#include "runtime/exec/stream_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "plan_test_util.h"
#include "sim/core/error.h"

namespace moesim::runtime {
namespace {

using testing::add_local;

// Happens-before that the plan itself enforces: stream order plus event waits, with `skip`
// (planned task slot, wait index) left out. before[j][i]: planned task i completes before j starts.
std::vector<std::vector<bool>> enforced(const StreamPlan& plan, std::size_t skip_task = SIZE_MAX,
                                        std::size_t skip_wait = SIZE_MAX) {
  const std::size_t n = plan.tasks.size();
  std::map<TaskIndex, std::size_t> slot;
  for (std::size_t i = 0; i < n; ++i) slot[plan.tasks[i].task] = i;
  std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));
  std::vector<std::int64_t> last(plan.streams.size(), -1);
  const auto inherit = [&](std::size_t j, std::size_t i) {
    before[j][i] = true;
    for (std::size_t k = 0; k < n; ++k)
      if (before[i][k]) before[j][k] = true;
  };
  for (std::size_t j = 0; j < n; ++j) {
    const PlannedTask& t = plan.tasks[j];
    const auto s = static_cast<std::size_t>(t.stream);
    if (last[s] >= 0) inherit(j, static_cast<std::size_t>(last[s]));
    for (std::size_t w = 0; w < t.waits.size(); ++w) {
      if (j == skip_task && w == skip_wait) continue;
      inherit(j, slot.at(plan.events[static_cast<std::size_t>(t.waits[w])].after));
    }
    last[s] = static_cast<std::int64_t>(j);
  }
  return before;
}

// Every dependency between two tasks of the rank is enforced.
bool all_enforced(const TaskGraph& g, const StreamPlan& plan, const std::vector<std::vector<bool>>& before) {
  std::map<TaskIndex, std::size_t> slot;
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) slot[plan.tasks[i].task] = i;
  for (std::size_t j = 0; j < plan.tasks.size(); ++j)
    for (TaskIndex p : g.predecessors(plan.tasks[j].task)) {
      const auto it = slot.find(p);
      if (it != slot.end() && !before[j][it->second]) return false;
    }
  return true;
}

TEST(StreamPlan, HandSolvedGraphNeedsOnlyTheWaitsNotImpliedByEarlierOnes) {
  TaskGraph g(1, {0});
  const TaskIndex a0 = add_local(g, "a0", StreamClass::kCompute);
  const TaskIndex a1 = add_local(g, "a1", StreamClass::kCompute);
  const TaskIndex d0 = add_local(g, "d0", StreamClass::kCommDispatch);
  const TaskIndex d1 = add_local(g, "d1", StreamClass::kCommDispatch);
  const TaskIndex a2 = add_local(g, "a2", StreamClass::kCompute);
  const TaskIndex h0 = add_local(g, "h0", StreamClass::kCopyH2D);
  g.add_dependency(a0, d0);
  g.add_dependency(a1, d1);
  g.add_dependency(d0, a2);  // implied by d1 (later on the same stream)
  g.add_dependency(d1, a2);
  g.add_dependency(a0, h0);  // implied by d1, which waited for a1, after a0 on compute
  g.add_dependency(d1, h0);
  g.add_dependency(a0, a1);  // same stream: nothing to do

  const StreamPlan plan = plan_streams(g, 0);
  ASSERT_EQ(plan.streams, (std::vector<StreamClass>{StreamClass::kCompute, StreamClass::kCommDispatch,
                                                    StreamClass::kCopyH2D}));
  EXPECT_EQ(plan.stream_of_class[static_cast<std::size_t>(StreamClass::kCommCombine)], -1);
  std::map<TaskIndex, const PlannedTask*> by_task;
  for (const PlannedTask& t : plan.tasks) by_task[t.task] = &t;
  const auto waits_on = [&](TaskIndex t) {
    std::vector<TaskIndex> out;
    for (int e : by_task.at(t)->waits) out.push_back(plan.events[static_cast<std::size_t>(e)].after);
    return out;
  };
  EXPECT_TRUE(waits_on(a0).empty());
  EXPECT_TRUE(waits_on(a1).empty());
  EXPECT_EQ(waits_on(d0), std::vector<TaskIndex>{a0});
  EXPECT_EQ(waits_on(d1), std::vector<TaskIndex>{a1});
  EXPECT_EQ(waits_on(a2), std::vector<TaskIndex>{d1});
  EXPECT_EQ(waits_on(h0), std::vector<TaskIndex>{d1});
  EXPECT_EQ(plan.cross_stream_dependencies, 6);
  EXPECT_EQ(plan.num_waits(), 4);
  EXPECT_EQ(plan.events.size(), 3u);  // a0, a1, d1; d1's event serves two waits
  EXPECT_EQ(by_task.at(d1)->records, by_task.at(a2)->waits.front());
  EXPECT_EQ(by_task.at(d1)->position, 1);
}

TEST(StreamPlan, RejectsALocalDependencyOnAnotherRank) {
  TaskGraph g(2, {0, 1});
  const TaskIndex x = add_local(g, "x", StreamClass::kCompute, 1);
  const TaskIndex y = add_local(g, "y", StreamClass::kCompute, 0);
  g.add_dependency(x, y);
  EXPECT_THROW(plan_streams(g, 0), InputError);
  EXPECT_NO_THROW(plan_streams(g, 1));
  EXPECT_THROW(plan_streams(TaskGraph(2, {1}), 0), InputError);  // rank not simulated
}

TEST(StreamPlan, BuilderGraphsAreEnforcedWithAMinimalSetOfWaits) {
  const ClusterSpec cluster = testing::adira();
  std::int64_t reduced = 0;
  for (const testing::BuilderCase& c : testing::builder_cases(cluster)) {
    const StreamPlan plan = plan_streams(c.graph, 0);
    const auto before = enforced(plan);
    ASSERT_TRUE(all_enforced(c.graph, plan, before)) << c.label;
    EXPECT_LE(plan.num_waits(), plan.cross_stream_dependencies) << c.label;
    reduced += plan.cross_stream_dependencies - plan.num_waits();
    // Minimality is checked on the smaller graphs (it replays the plan once per wait).
    if (c.graph.num_tasks() > 200) continue;
    for (std::size_t j = 0; j < plan.tasks.size(); ++j)
      for (std::size_t w = 0; w < plan.tasks[j].waits.size(); ++w)
        EXPECT_FALSE(all_enforced(c.graph, plan, enforced(plan, j, w)))
            << c.label << ": the wait " << w << " of " << c.graph.task(plan.tasks[j].task).id << " is redundant";
  }
  EXPECT_GT(reduced, 0);  // the builder's graphs do contain implied dependencies
}

TEST(StreamPlan, EveryRankOfAFullGraphPlansThroughTheCollectives) {
  const ClusterSpec cluster = testing::adira();
  ModelSpec m;
  m.d_model = 64;
  m.d_ffn = 128;
  m.num_experts = 8;
  m.top_k = 2;
  RunSpec run;
  run.tokens_per_gpu = 64;
  run.ep_size = 4;
  run.num_chunks = 2;
  run.strategy = MemoryStrategy::kS2;
  const TaskGraph g = build_moe_graph(m, cluster, run, BuildOptions{false});
  ASSERT_EQ(g.simulated_ranks().size(), 4u);
  std::int64_t waits = -1;
  for (int r = 0; r < 4; ++r) {
    const StreamPlan plan = plan_streams(g, r);
    EXPECT_TRUE(all_enforced(g, plan, enforced(plan)));
    // Ranks are symmetric: the same number of waits on each.
    if (waits >= 0) {
      EXPECT_EQ(plan.num_waits(), waits);
    }
    waits = plan.num_waits();
  }
}

}  // namespace
}  // namespace moesim::runtime
