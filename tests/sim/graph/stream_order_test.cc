// A stream order other than insertion order (TaskGraph::hold_stream_order, release_stream_order):
// the stream edges follow the order given, the held tasks are on their streams only once
// released, and an order that is not the held tasks is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/graph/graph_json.h"
#include "sim/graph/task_graph.h"

namespace moesim {
namespace {

TaskIndex kernel(TaskGraph& g, const std::string& id, StreamClass stream = StreamClass::kCompute) {
  Task t;
  t.id = id;
  t.rank = 0;
  t.stream = stream;
  t.work = HostWork{10};
  return g.add_task(t);
}

bool has_edge(const TaskGraph& g, TaskIndex from, TaskIndex to) {
  for (const auto& [a, b, kind] : g.edges())
    if (a == from && b == to) return true;
  return false;
}

TEST(StreamOrder, ReleasedTasksJoinTheirStreamsInTheOrderGiven) {
  TaskGraph g(1, {0});
  const TaskIndex before = kernel(g, "before");
  g.hold_stream_order();
  const TaskIndex f1 = kernel(g, "f1"), f2 = kernel(g, "f2"), b1 = kernel(g, "b1"), b2 = kernel(g, "b2");
  const TaskIndex copy = kernel(g, "copy", StreamClass::kCopyD2H);
  EXPECT_EQ(g.stream_tasks(0, StreamClass::kCompute), std::vector<TaskIndex>{before});  // held: not yet on it
  g.release_stream_order({f1, b1, copy, f2, b2});
  EXPECT_EQ(g.stream_tasks(0, StreamClass::kCompute), (std::vector<TaskIndex>{before, f1, b1, f2, b2}));
  EXPECT_EQ(g.stream_tasks(0, StreamClass::kCopyD2H), std::vector<TaskIndex>{copy});
  EXPECT_TRUE(g.stream_order_released());
  EXPECT_TRUE(has_edge(g, before, f1));
  EXPECT_TRUE(has_edge(g, f1, b1));
  EXPECT_TRUE(has_edge(g, b1, f2));
  EXPECT_TRUE(has_edge(g, f2, b2));
  EXPECT_FALSE(has_edge(g, f1, f2));  // insertion order no longer chains them
  EXPECT_FALSE(has_edge(g, b2, copy));
  // After the release, add_task appends as before.
  const TaskIndex after = kernel(g, "after");
  EXPECT_TRUE(has_edge(g, b2, after));
}

TEST(StreamOrder, RefusesAnOrderThatIsNotTheHeldTasks) {
  TaskGraph g(1, {0});
  const TaskIndex before = kernel(g, "before");
  EXPECT_THROW(g.release_stream_order({}), InternalError);  // no hold
  g.hold_stream_order();
  EXPECT_THROW(g.hold_stream_order(), InternalError);  // nested
  const TaskIndex a = kernel(g, "a"), b = kernel(g, "b");
  EXPECT_THROW(g.release_stream_order({a}), InternalError);              // one missing
  EXPECT_THROW(g.release_stream_order({a, a}), InternalError);           // one twice
  EXPECT_THROW(g.release_stream_order({before, a}), InternalError);      // not held
  EXPECT_THROW(g.release_stream_order({a, b, b + 1}), InternalError);    // no such task
  EXPECT_FALSE(g.stream_order_released());
  g.release_stream_order({b, a});
  EXPECT_EQ(g.stream_tasks(0, StreamClass::kCompute), (std::vector<TaskIndex>{before, b, a}));
  EXPECT_TRUE(g.stream_order_released());
  // Graph JSON lists each stream in index order: such a graph is refused, not written wrongly.
  EXPECT_THROW(export_graph_json(g), InputError);
}

}  // namespace
}  // namespace moesim
