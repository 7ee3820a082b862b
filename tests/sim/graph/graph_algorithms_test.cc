#include "sim/graph/graph_algorithms.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/build/moe_graph.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One host task per rank, so that add_task creates no stream edges between them.
TaskGraph host_graph(const std::vector<std::string>& ids) {
  std::vector<int> ranks;
  for (std::size_t i = 0; i < ids.size(); ++i) ranks.push_back(static_cast<int>(i));
  TaskGraph g(static_cast<int>(ids.size()), ranks);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    Task t;
    t.id = ids[i];
    t.rank = static_cast<int>(i);
    t.work = HostWork{10};
    g.add_task(t);
  }
  return g;
}

TEST(HasPath, FollowsOneOrMoreEdges) {
  TaskGraph g = host_graph({"a", "b", "c", "d"});
  g.add_dependency(0, 1);
  g.add_dependency(1, 2);
  EXPECT_TRUE(has_path(g, 0, 1));
  EXPECT_TRUE(has_path(g, 0, 2));
  EXPECT_FALSE(has_path(g, 2, 0));
  EXPECT_FALSE(has_path(g, 0, 3));
  EXPECT_FALSE(has_path(g, 1, 1));  // no cycle: a task does not reach itself
}

TEST(FindCycle, NoneInDag) {
  TaskGraph g = host_graph({"a", "b", "c"});
  g.add_dependency(0, 1);
  g.add_dependency(1, 2);
  g.add_dependency(0, 2);
  EXPECT_FALSE(find_cycle(g).has_value());
  EXPECT_NO_THROW(check_acyclic(g));
}

TEST(FindCycle, ReportsWholePath) {
  TaskGraph g = host_graph({"a", "b", "c", "d"});
  g.add_dependency(3, 0);
  g.add_dependency(0, 1);
  g.add_dependency(1, 2);
  g.add_dependency(2, 0, DepKind::kReuse);
  const auto cycle = find_cycle(g);
  ASSERT_TRUE(cycle.has_value());
  EXPECT_THAT(*cycle, ElementsAre(0u, 1u, 2u, 0u));
  // Labels carry the rank because the graph simulates several ranks.
  EXPECT_EQ(describe_path(g, *cycle), "a@0 -> b@1 -> c@2 -> a@0");
  try {
    check_acyclic(g);
    ADD_FAILURE() << "cycle not detected";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("dependency cycle: a@0 -> b@1 -> c@2 -> a@0"));
  }
  EXPECT_THROW(topological_order(g), InputError);
}

TEST(FindCycle, SingleRankLabelsAreBareIds) {
  TaskGraph g(2, {0});
  for (const char* id : {"x", "y"}) {
    Task t;
    t.id = id;
    t.work = HostWork{1};
    g.add_task(t);  // same stream: stream edge x -> y
  }
  g.add_dependency(1, 0);
  const auto cycle = find_cycle(g);
  ASSERT_TRUE(cycle.has_value());
  EXPECT_EQ(describe_path(g, *cycle), "x -> y -> x");
}

TEST(TopologicalOrder, SmallestIndexFirstAndRespectsEdges) {
  TaskGraph g = host_graph({"a", "b", "c", "d", "e"});
  g.add_dependency(3, 1);
  g.add_dependency(4, 0);
  g.add_dependency(2, 4);
  EXPECT_THAT(topological_order(g), ElementsAre(2u, 3u, 1u, 4u, 0u));
}

TEST(TopologicalOrder, RespectsEveryEdgeOfBuiltGraphs) {
  for (OrderPolicy p : testing::kAllPolicies) {
    const TaskGraph g = build_moe_graph(testing::small_model(), testing::small_cluster(),
                                        testing::small_run(4, p, 4), BuildOptions{false});
    const auto order = topological_order(g);
    ASSERT_EQ(order.size(), g.num_tasks());
    std::vector<std::size_t> pos(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
    for (const auto& [from, to, kind] : g.edges()) EXPECT_LT(pos[from], pos[to]);
  }
}

TEST(CriticalPath, HandMadeGraph) {
  // a(3) -> b(5) -> d(4); a -> c(2) -> d; e(20) alone.
  TaskGraph g = host_graph({"a", "b", "c", "d", "e"});
  g.add_dependency(0, 1);
  g.add_dependency(0, 2);
  g.add_dependency(1, 3);
  g.add_dependency(2, 3);
  CriticalPath cp = critical_path(g, {3, 5, 2, 4, 11});
  EXPECT_EQ(cp.length_ns, 12);
  EXPECT_THAT(cp.path, ElementsAre(0u, 1u, 3u));
  cp = critical_path(g, {3, 5, 2, 4, 20});
  EXPECT_EQ(cp.length_ns, 20);
  EXPECT_THAT(cp.path, ElementsAre(4u));
  // Ties pick the smallest index: b and c equal, d's path goes through b.
  cp = critical_path(g, {1, 2, 2, 1, 0});
  EXPECT_EQ(cp.length_ns, 4);
  EXPECT_THAT(cp.path, ElementsAre(0u, 1u, 3u));
}

TEST(CriticalPath, EmptyGraphAndWrongDurationCount) {
  TaskGraph g(1, {0});
  EXPECT_EQ(critical_path(g, {}).length_ns, 0);
  EXPECT_TRUE(critical_path(g, {}).path.empty());
  TaskGraph h = host_graph({"a"});
  EXPECT_THROW(critical_path(h, {1, 2}), InternalError);
}

TEST(CriticalPath, CountsStreamEdges) {
  // Two independent tasks on one stream still run one after the other.
  TaskGraph g(1, {0});
  for (const char* id : {"x", "y"}) {
    Task t;
    t.id = id;
    t.work = HostWork{1};
    g.add_task(t);
  }
  const CriticalPath cp = critical_path(g, {7, 5});
  EXPECT_EQ(cp.length_ns, 12);
  EXPECT_THAT(cp.path, ElementsAre(0u, 1u));
}

}  // namespace
}  // namespace moesim
