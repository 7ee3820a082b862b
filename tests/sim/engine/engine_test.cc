#include "sim/engine/engine.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <utility>

#include "sim/core/error.h"
#include "sim/cost/local_task_model.h"
#include "sim/engine/rated_activities.h"
#include "sim/graph/trace.h"
#include "sim/net/alpha_beta.h"
#include "../task_builders.h"
#include "fixed_model.h"

namespace moesim {
namespace {

// A model that accepts tasks and never finishes them.
class StuckModel final : public ActivityModel {
 public:
  std::string_view name() const override { return "stuck"; }
  bool handles(const Task&) const override { return true; }
  void start(TaskIndex, TimeNs, const Concurrency&) override {}
  void on_concurrency_change(std::span<const int>, TimeNs, const Concurrency&) override {}
  TimeNs next_completion() const override { return kNever; }
  void advance_to(TimeNs, std::vector<TaskIndex>&) override {}
};

// Records the order of events.
class EventLog final : public EngineObserver {
 public:
  void on_task_end(TaskIndex task, TimeNs now) override { ends.emplace_back(task, now); }
  std::vector<std::pair<TaskIndex, TimeNs>> ends;
};


using testing::all_to_all_task;
using testing::any_task;
using testing::FixedModel;
using testing::run_fixed;
using testing::host_task;


TEST(Engine, EmptyGraphFinishesAtZero) {
  TaskGraph g(1, {0});
  Engine engine(g);
  EXPECT_EQ(engine.run(), 0);
}

TEST(Engine, DependenciesAreRespected) {
  TaskGraph g(1, {0});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 100));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCopyD2H, 50));
  const auto c = g.add_task(host_task("c", 0, StreamClass::kCopyH2D, 30));
  g.add_dependency(a, b);
  g.add_dependency(b, c);
  const Trace t = run_fixed(g);
  EXPECT_EQ(t.records[a].ready_ns, 0);
  EXPECT_EQ(t.records[a].end_ns, 100);
  EXPECT_EQ(t.records[b].ready_ns, 100);
  EXPECT_EQ(t.records[b].start_ns, 100);
  EXPECT_EQ(t.records[b].end_ns, 150);
  EXPECT_EQ(t.records[c].start_ns, 150);
  EXPECT_EQ(t.records[c].end_ns, 180);
  EXPECT_EQ(t.makespan_ns(), 180);
}

TEST(Engine, StreamRunsOneTaskAtATime) {
  TaskGraph g(1, {0});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 100));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCompute, 100));
  const auto c = g.add_task(host_task("c", 0, StreamClass::kCompute, 100));
  const Trace t = run_fixed(g);
  EXPECT_EQ(t.records[a].start_ns, 0);
  EXPECT_EQ(t.records[b].start_ns, 100);
  EXPECT_EQ(t.records[c].start_ns, 200);
  for (TaskIndex i = 0; i + 1 < 3; ++i) EXPECT_LE(t.records[i].end_ns, t.records[i + 1].start_ns);
}

TEST(Engine, IndependentStreamsOverlap) {
  TaskGraph g(1, {0});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 100));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCommDispatch, 70));
  const Trace t = run_fixed(g);
  EXPECT_EQ(t.records[a].start_ns, 0);
  EXPECT_EQ(t.records[b].start_ns, 0);
  EXPECT_EQ(t.records[b].end_ns, 70);
  EXPECT_EQ(t.makespan_ns(), 100);
}

TEST(Engine, CollectiveWaitsForEveryMember) {
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  // The collective is on the dispatch stream; its members reach it after their compute work.
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 100));
  const auto b = g.add_task(host_task("b", 1, StreamClass::kCompute, 300));
  const auto c = g.add_task(all_to_all_task("a2a", both, 1));
  g.add_dependency(a, c);
  g.add_dependency(b, c);
  // A second collective on the same stream queues behind the first (stream edge on both ranks).
  const auto d = g.add_task(all_to_all_task("a2a.2", both, 1));
  const Trace t = run_fixed(g, 50);
  EXPECT_EQ(t.records[c].ready_ns, 300);
  EXPECT_EQ(t.records[c].start_ns, 300);
  EXPECT_EQ(t.records[c].end_ns, 350);
  EXPECT_EQ(t.records[d].ready_ns, 350);
  EXPECT_EQ(t.records[d].end_ns, 400);
}

TEST(Engine, ZeroDurationTasksFinishWhenTheyStart) {
  TaskGraph g(1, {0});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 0));
  const auto b = g.add_task(host_task("b", 0, StreamClass::kCompute, 0));
  const auto c = g.add_task(host_task("c", 0, StreamClass::kCompute, 10));
  const Trace t = run_fixed(g);
  EXPECT_EQ(t.records[a].end_ns, 0);
  EXPECT_EQ(t.records[b].start_ns, 0);
  EXPECT_EQ(t.records[b].end_ns, 0);
  EXPECT_EQ(t.records[c].end_ns, 10);
}

// Pinned tie-break: completions at the same ns reach observers in (model registration order,
// task index) order. Model "rank1" is registered first and owns tasks 1 and 2; "rank0" owns 0.
TEST(Engine, TieBreakIsModelOrderThenTaskIndex) {
  TaskGraph g(2, {0, 1});
  g.add_task(host_task("x", 0, StreamClass::kCompute, 100));
  g.add_task(host_task("y", 1, StreamClass::kCompute, 100));
  g.add_task(host_task("z", 1, StreamClass::kCopyD2H, 100));
  Engine engine(g);
  engine.add_model(std::make_unique<FixedModel>(g, "rank1", [](const Task& t) { return t.rank == 1; }));
  engine.add_model(std::make_unique<FixedModel>(g, "rank0", [](const Task& t) { return t.rank == 0; }));
  EventLog log;
  engine.add_observer(&log);
  EXPECT_EQ(engine.run(), 100);
  const std::vector<std::pair<TaskIndex, TimeNs>> expected{{1, 100}, {2, 100}, {0, 100}};
  EXPECT_EQ(log.ends, expected);
}

TEST(Engine, TaskWithoutModelIsInternalError) {
  TaskGraph g(1, {0});
  g.add_task(host_task("a", 0, StreamClass::kCompute, 10));
  Engine engine(g);
  engine.add_model(std::make_unique<FixedModel>(g, "none", [](const Task&) { return false; }));
  EXPECT_THROW(engine.run(), InternalError);
}

TEST(Engine, TaskWithTwoModelsIsInternalError) {
  TaskGraph g(1, {0});
  g.add_task(host_task("a", 0, StreamClass::kCompute, 10));
  Engine engine(g);
  engine.add_model(std::make_unique<FixedModel>(g, "one", any_task));
  engine.add_model(std::make_unique<FixedModel>(g, "two", any_task));
  EXPECT_THROW(engine.run(), InternalError);
}

TEST(Engine, StallIsInternalError) {
  TaskGraph g(1, {0});
  g.add_task(host_task("a", 0, StreamClass::kCompute, 10));
  Engine engine(g);
  engine.add_model(std::make_unique<StuckModel>());
  EXPECT_THROW(engine.run(), InternalError);
}

// --- With the real models ---------------------------------------------------------------------

// One node of two GPUs, numbers chosen so durations are exact:
//   GEMM: fp32 peak 1e12 FLOP/s, efficiency 1 on one SM with 100 x 100 tiles (a 100 x 100 GEMM is
//         one tile, no padding), no launch or tile overhead, HBM 1e12 B/s.
//   NVLink: 1e10 B/s, no latency.
ClusterSpec two_gpu_node() {
  ClusterSpec c;
  c.name = "test-2gpu";
  c.num_nodes = 1;
  c.node.name = "test-node";
  c.node.gpus_per_node = 2;
  c.node.gpu.name = "TestGPU";
  c.node.gpu.peak_flops = {{DType::kFp32, 1e12}};
  c.node.gpu.hbm_bandwidth = 1e12;
  c.node.gpu.hbm_efficiency = 1.0;
  c.node.gpu.kernel_launch_ns = 0;
  c.node.gpu.sm_count = 1;
  c.node.gpu.gemm_efficiency = {{DType::kFp32, 1.0}};
  c.node.gpu.gemm_tile = {{DType::kFp32, GemmTile{100, 100}}};
  c.node.intra_node = {1e10, 1.0, 0};
  c.node.pcie_d2h = {1e10, 1.0, 0};
  c.node.pcie_h2d = {1e10, 1.0, 0};
  c.inter_node = {1e10, 1.0, 0};
  return c;  // interference: the default MPipeMoE table
}

Task gemm(std::string id, int rank, std::int64_t m, std::int64_t n, std::int64_t k) {
  Task t;
  t.id = std::move(id);
  t.rank = rank;
  t.stream = StreamClass::kCompute;
  t.work = GemmWork{1, m, n, k, DType::kFp32, 4};
  return t;
}

Trace run_real(const TaskGraph& g, const ClusterSpec& c) {
  Engine engine(g);
  engine.add_model(std::make_unique<LocalTaskModel>(g, c));
  engine.add_model(std::make_unique<AlphaBetaNetwork>(g, c));
  return testing::run_traced(engine, g);
}

// GEMM 100x100x480: 9.6e6 FLOP / 1e12 = 9600 ns isolated (memory: 424000 B / 1e12 = 424 ns).
// All-to-all over {0, 1}, 36000 B per peer: NCCL's Simple base latency 8400 ns, one round of
// peers at the link's 0 ns, then one intra peer, 36000 B / 1e10 B/s = 3600 ns: 12000 ns.
// Both start at 0 on rank 0 (compute and dispatch):
//   GEMM runs at computation-with-communication = 0.96 -> ends at 9600 / 0.96 = 10000;
//   the all-to-all's latency elapses at full speed (it holds no link) until 8400, then its bytes
//   move at min(rank 0: communication-with-computation 0.72, rank 1: 1.0) = 0.72.
// At 10000 the bytes have done 1600 * 0.72 = 1152 ns of work; the remaining 2448 run at full
// speed -> it ends at 12448.
TEST(EngineWithModels, InterferenceSlowsOverlappingComputeAndCommunication) {
  const ClusterSpec c = two_gpu_node();
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  const auto mm = g.add_task(gemm("fc1", 0, 100, 100, 480));
  const auto a2a = g.add_task(all_to_all_task("dispatch", both, 36000));
  const Trace t = run_real(g, c);
  EXPECT_EQ(t.records[mm].start_ns, 0);
  EXPECT_EQ(t.records[a2a].start_ns, 0);
  EXPECT_EQ(t.records[a2a].end_ns, 12448);
  EXPECT_EQ(t.records[mm].end_ns, 10000);
}

// Without overlap the same tasks take their isolated durations: GEMM then all-to-all.
TEST(EngineWithModels, SerialTasksRunAtIsolatedSpeed) {
  const ClusterSpec c = two_gpu_node();
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  const auto mm = g.add_task(gemm("fc1", 0, 100, 100, 480));
  const auto a2a = g.add_task(all_to_all_task("combine", both, 36000));
  g.add_dependency(mm, a2a);
  const Trace t = run_real(g, c);
  EXPECT_EQ(t.records[mm].end_ns, 9600);
  EXPECT_EQ(t.records[a2a].start_ns, 9600);
  EXPECT_EQ(t.records[a2a].end_ns, 13200 + 8400);  // the all-to-all: NCCL's base latency + 3600
}

// Rendezvous with real models: rank 1's GEMM (9600 ns) delays the collective for both ranks, and
// rank 0's short GEMM (100x100x100: 2e6 FLOP = 2000 ns) finishes early and waits.
TEST(EngineWithModels, CollectiveStartsWhenAllMembersArrive) {
  const ClusterSpec c = two_gpu_node();
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  const auto g0 = g.add_task(gemm("fc1", 0, 100, 100, 100));
  const auto g1 = g.add_task(gemm("fc1", 1, 100, 100, 480));
  const auto a2a = g.add_task(all_to_all_task("combine", both, 36000, StreamClass::kCommCombine));
  g.add_dependency(g0, a2a);
  g.add_dependency(g1, a2a);
  const Trace t = run_real(g, c);
  EXPECT_EQ(t.records[g0].end_ns, 2000);
  EXPECT_EQ(t.records[g1].end_ns, 9600);
  EXPECT_EQ(t.records[a2a].ready_ns, 9600);
  EXPECT_EQ(t.records[a2a].end_ns, 13200 + 8400);
}

TEST(EngineWithModels, IdenticalRunsGiveIdenticalTraces) {
  const ClusterSpec c = two_gpu_node();
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  for (int chunk = 0; chunk < 4; ++chunk) {
    const std::string s = std::to_string(chunk);
    const auto d = g.add_task(all_to_all_task("dispatch.c" + s, both, 36000 + 1000 * chunk));
    const auto m0 = g.add_task(gemm("fc1.c" + s, 0, 100, 100, 480 - 7 * chunk));
    const auto m1 = g.add_task(gemm("fc1.c" + s, 1, 100, 100, 480 + 3 * chunk));
    const auto cb = g.add_task(all_to_all_task("combine.c" + s, both, 36000, StreamClass::kCommCombine));
    g.add_dependency(d, m0);
    g.add_dependency(d, m1);
    g.add_dependency(m0, cb);
    g.add_dependency(m1, cb);
  }
  const Trace first = run_real(g, c);
  const Trace second = run_real(g, c);
  ASSERT_EQ(first.records.size(), second.records.size());
  for (std::size_t i = 0; i < first.records.size(); ++i) {
    EXPECT_EQ(first.records[i].ready_ns, second.records[i].ready_ns) << i;
    EXPECT_EQ(first.records[i].start_ns, second.records[i].start_ns) << i;
    EXPECT_EQ(first.records[i].end_ns, second.records[i].end_ns) << i;
    EXPECT_LE(first.records[i].ready_ns, first.records[i].start_ns);
    EXPECT_LT(first.records[i].start_ns, first.records[i].end_ns);
  }
  // Every dependency is respected.
  for (const auto& [from, to, kind] : g.edges())
    EXPECT_LE(first.records[from].end_ns, first.records[to].start_ns);
}

}  // namespace
}  // namespace moesim
