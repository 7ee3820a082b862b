// The host's issue of device work (sim/engine/host_issue.h): launches in program order, one after
// the other; a host that runs ahead of the GPU; a host read that stops it; a collective issued
// when its last rank issues it.
#include "sim/engine/host_issue.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "sim/core/error.h"
#include "sim/engine/engine.h"
#include "sim/graph/trace.h"
#include "../task_builders.h"
#include "fixed_model.h"

namespace moesim {
namespace {

using testing::all_to_all_task;
using testing::any_task;
using testing::FixedModel;
using testing::host_task;

Trace run_issued(const TaskGraph& g, const HostIssueSpec& spec) { return testing::run_fixed(g, 100, &spec); }

TEST(HostIssue, LaunchesAreIssuedOneAfterTheOther) {
  // Three independent tasks on three streams of one rank: without a host all start at 0.
  TaskGraph g(1, {0});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 100));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCopyD2H, 100));
  const auto c = g.add_task(host_task("c", 0, StreamClass::kCommGrad, 100));
  const Trace t = run_issued(g, {{10, 10, 10}, {}, {}});
  EXPECT_EQ(t.records[a].start_ns, 10);
  EXPECT_EQ(t.records[b].start_ns, 20);
  EXPECT_EQ(t.records[c].start_ns, 30);
  EXPECT_EQ(t.records[c].ready_ns, 30);
  EXPECT_EQ(t.makespan_ns(), 130);
}

TEST(HostIssue, TheHostRunsAheadOfASlowGpu) {
  // One stream of 100 ns kernels launched 10 ns apart: only the first waits for its launch.
  TaskGraph g(1, {0});
  for (int k = 0; k < 3; ++k) g.add_task(host_task("k" + std::to_string(k), 0, StreamClass::kCompute, 100));
  const Trace t = run_issued(g, {{10, 10, 10}, {}, {}});
  EXPECT_EQ(t.records[0].start_ns, 10);
  EXPECT_EQ(t.records[1].start_ns, 110);
  EXPECT_EQ(t.records[2].start_ns, 210);
  EXPECT_EQ(t.makespan_ns(), 310);
}

TEST(HostIssue, AHostSlowerThanTheGpuSetsThePace) {
  // 10 ns kernels launched 100 ns apart: the GPU idles between them.
  TaskGraph g(1, {0});
  for (int k = 0; k < 3; ++k) g.add_task(host_task("k" + std::to_string(k), 0, StreamClass::kCompute, 10));
  const Trace t = run_issued(g, {{100, 100, 100}, {}, {}});
  EXPECT_EQ(t.records[0].start_ns, 100);
  EXPECT_EQ(t.records[1].start_ns, 200);
  EXPECT_EQ(t.records[2].start_ns, 300);
  EXPECT_EQ(t.makespan_ns(), 310);
}

TEST(HostIssue, AHostReadStopsTheHostUntilItsTaskEnds) {
  // The host reads a's result (a D2H copy's): b, on another stream and independent of a, is
  // issued only after a ends, c after b's launch.
  TaskGraph g(1, {0});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCopyD2H, 100));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCompute, 100));
  const auto c = g.add_task(host_task("c", 0, StreamClass::kCommGrad, 100));
  const Trace t = run_issued(g, {{10, 10, 10}, {a}, {}});
  EXPECT_EQ(t.records[a].start_ns, 10);
  EXPECT_EQ(t.records[a].end_ns, 110);
  EXPECT_EQ(t.records[b].start_ns, 120);
  EXPECT_EQ(t.records[c].start_ns, 130);
}

TEST(HostIssue, ACollectiveStartsWhenItsLastRankIssuesIt) {
  // Rank 1 launches x before the all-to-all, rank 0 nothing: the all-to-all is issued at 20.
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  const auto x = g.add_task(host_task("x", 1, StreamClass::kCompute, 100));
  const auto a2a = g.add_task(all_to_all_task("a2a", both, 1));
  const Trace t = run_issued(g, {{10, 10}, {}, {}});
  EXPECT_EQ(t.records[x].start_ns, 10);
  EXPECT_EQ(t.records[a2a].start_ns, 20);
}

TEST(HostIssue, TasksTheHostDoesNotIssueStartWithTheirPredecessors) {
  TaskGraph g(1, {0});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 100));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCommPipeline, 100));
  const Trace t = run_issued(g, {{50, kNotIssued}, {}, {}});
  EXPECT_EQ(t.records[a].start_ns, 50);
  EXPECT_EQ(t.records[b].start_ns, 0);
}

TEST(HostIssue, FreeLaunchesWithoutReadsChangeNothing) {
  // Launch time 0 and no host read: the same trace as without the host.
  TaskGraph g(1, {0});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 100));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCopyD2H, 50));
  g.add_dependency(a, b);
  const Trace t = run_issued(g, {{0, 0}, {}, {}});
  EXPECT_EQ(t.records[b].start_ns, 100);
  EXPECT_EQ(t.makespan_ns(), 150);
}

TEST(HostIssue, TheStepStaysBetweenTheGpuAloneAndEverythingInSeries) {
  // Invariant: the makespan without a host <= the makespan with one <= every launch and every
  // task one after the other.
  TaskGraph g(1, {0});
  TaskIndex prev = g.add_task(host_task("t0", 0, StreamClass::kCompute, 30));
  TimeNs work = 30;
  for (int k = 1; k < 20; ++k) {
    const StreamClass s = k % 3 == 0 ? StreamClass::kCommGrad : StreamClass::kCompute;
    const TaskIndex t = g.add_task(host_task("t" + std::to_string(k), 0, s, 10 + 7 * (k % 5)));
    work += 10 + 7 * (k % 5);
    if (k % 4 == 0) g.add_dependency(prev, t);
    prev = t;
  }
  const Trace free = run_issued(g, {std::vector<TimeNs>(g.num_tasks(), 0), {}, {}});
  const Trace costly = run_issued(g, {std::vector<TimeNs>(g.num_tasks(), 15), {3, 9}, {}});
  EXPECT_GE(costly.makespan_ns(), free.makespan_ns());
  EXPECT_LE(costly.makespan_ns(), work + 15 * static_cast<TimeNs>(g.num_tasks()));
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) EXPECT_GE(costly.records[i].start_ns, 15 * (i + 1));
}

TEST(HostIssue, AnIssueOrderReplacesIndexOrder) {
  // Two streams' tasks, held and released in another order (TaskGraph::hold_stream_order): the
  // host issues them in that order, 10 ns each.
  TaskGraph g(1, {0});
  g.hold_stream_order();
  const auto f = g.add_task(host_task("f", 0, StreamClass::kCompute, 100));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCommGrad, 100));
  const auto f2 = g.add_task(host_task("f2", 0, StreamClass::kCompute, 100));
  g.release_stream_order({b, f, f2});
  const Trace t = run_issued(g, {{10, 10, 10}, {}, {b, f, f2}});
  EXPECT_EQ(t.records[b].start_ns, 10);
  EXPECT_EQ(t.records[f].start_ns, 20);
  EXPECT_EQ(t.records[f2].start_ns, 120);  // issued at 30, behind f on the compute stream
  // An order that is not a permutation of the tasks, or that issues a task before its stream
  // predecessor, is refused.
  const auto run_with = [&](std::vector<TaskIndex> order) {
    Engine engine(g);
    engine.add_model(std::make_unique<FixedModel>(g, "fixed", any_task));
    engine.issue_from_host({{10, 10, 10}, {}, std::move(order)});
    engine.run();
  };
  EXPECT_THROW(run_with({b, f}), InternalError);
  EXPECT_THROW(run_with({b, b, f}), InternalError);
  EXPECT_THROW(run_with({f2, b, f}), InternalError);
}

TEST(HostIssue, AHostReadTheHostDoesNotIssueIsRefused) {
  TaskGraph g(1, {0});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 100));
  Engine engine(g);
  engine.add_model(std::make_unique<FixedModel>(g, "fixed", any_task));
  engine.issue_from_host({{kNotIssued}, {a}, {}});
  EXPECT_THROW(engine.run(), InternalError);
}

TEST(HostIssue, AHostReadOnTwoRanksHoldsBothHostsUntilItEnds) {
  // The all-to-all over ranks 0 and 1 is read by both hosts: each issues its next task only
  // after it ends (issued at 10 on both, 100 long).
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  const auto a2a = g.add_task(all_to_all_task("a2a", both, 1));
  const auto x = g.add_task(host_task("x", 0, StreamClass::kCompute, 100));
  const auto y = g.add_task(host_task("y", 1, StreamClass::kCompute, 100));
  const Trace t = run_issued(g, {{10, 10, 10}, {a2a}, {}});
  EXPECT_EQ(t.records[a2a].start_ns, 10);
  EXPECT_EQ(t.records[x].start_ns, t.records[a2a].end_ns + 10);
  EXPECT_EQ(t.records[y].start_ns, t.records[a2a].end_ns + 10);
}

TEST(HostIssue, AKernelReachesTheGpuQueueWhenItsHostLaunchesIt) {
  // A copy on the SMs that could start at 0 but is launched at 50, after a GEMM-like kernel that
  // started at 10 and fills the SMs until 110: it arrived after the kernel, so it waits for it.
  TaskGraph g(1, {0});
  const auto k = g.add_task(host_task("k", 0, StreamClass::kCompute, 100));
  const auto c = g.add_task(host_task("c", 0, StreamClass::kCommDispatch, 5));
  Engine engine(g);
  engine.add_model(std::make_unique<FixedModel>(g, "fixed", any_task));
  engine.queue_kernels({KernelRole::kHoldsSms, KernelRole::kQueuesBehind});
  engine.issue_from_host({{10, 40}, {}, {}});
  const Trace t = testing::run_traced(engine, g);
  EXPECT_EQ(t.records[k].start_ns, 10);
  EXPECT_EQ(t.records[c].end_ns, 110 + 5);
}

TEST(HostIssue, ATaskIssuedBeforeItsOwnPredecessorIsRefused) {
  // b (index 1) must wait for c (index 2) on the same rank: issued in index order, the host would
  // issue b first and wait for itself; the engine names the two tasks instead of stalling.
  TaskGraph g(1, {0});
  g.add_task(host_task("a", 0, StreamClass::kCompute, 10));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCopyD2H, 10));
  const auto c = g.add_task(host_task("c", 0, StreamClass::kCopyH2D, 10));
  g.add_dependency(c, b);
  Engine engine(g);
  engine.add_model(std::make_unique<FixedModel>(g, "fixed", any_task));
  engine.issue_from_host({{10, 10, 10}, {}, {}});
  try {
    engine.run();
    ADD_FAILURE() << "no error";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("'b' before its predecessor 'c'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moesim
