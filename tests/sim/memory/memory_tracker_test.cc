// MemoryTracker on hand-made graphs with a fixed-duration model: peaks, breakdowns, live sets,
// resident buffers, pinned host memory, same-instant free-then-allocate, and misuse.
#include "sim/memory/memory_tracker.h"

#include <gtest/gtest.h>

#include <memory>

#include "sim/core/error.h"
#include "sim/engine/engine.h"
#include "sim/graph/graph_json.h"

namespace moesim {
namespace {

// Every task takes its HostWork duration; no interference.
class FixedModel final : public ActivityModel {
 public:
  explicit FixedModel(const TaskGraph& g) : g_(g) {}
  std::string_view name() const override { return "fixed"; }
  bool handles(const Task&) const override { return true; }
  void start(TaskIndex t, TimeNs now, const Concurrency&) override {
    running_.push_back({t, now + std::get<HostWork>(g_.task(t).work).duration_ns});
  }
  void on_concurrency_change(std::span<const int>, TimeNs, const Concurrency&) override {}
  TimeNs next_completion() const override {
    TimeNs n = kNever;
    for (const auto& [t, end] : running_) n = std::min(n, end);
    return n;
  }
  void advance_to(TimeNs now, std::vector<TaskIndex>& finished) override {
    std::vector<std::pair<TaskIndex, TimeNs>> keep;
    for (const auto& r : running_) (r.second == now ? finished.push_back(r.first) : keep.push_back(r));
    std::sort(finished.begin(), finished.end());
    running_ = keep;
  }

 private:
  const TaskGraph& g_;
  std::vector<std::pair<TaskIndex, TimeNs>> running_;
};

Task host_task(std::string id, StreamClass s, TimeNs d) {
  Task t;
  t.id = std::move(id);
  t.stream = s;
  t.stage = "x";
  t.work = HostWork{d};
  return t;
}

MemoryTracker run(const TaskGraph& g) {
  MemoryTracker tracker(g);
  Engine e(g);
  e.add_model(std::make_unique<FixedModel>(g));
  e.add_observer(&tracker);
  e.run();
  return tracker;
}

// Timeline (one stream): a [0,10) allocs A (100); b [10,20) allocs B (50), frees A;
// c [20,30) allocs C (30) and frees B and C. Weights W (1000) resident; pinned H (7) by a.
// Device: 1000 -> 1100 at 0 -> 1150 at 10 (A and B live while b runs) -> A freed at 20 -> 1050,
// then C -> 1080 at 20; B and C freed at 30 -> 1000.
TEST(MemoryTracker, PeakBreakdownAndLiveSet) {
  TaskGraph g(1, {0});
  const BufferId w = g.add_buffer({"W", 0, 1000, MemoryCategory::kModelStates, true});
  const BufferId a = g.add_buffer({"A", 0, 100, MemoryCategory::kActivations, false});
  const BufferId b = g.add_buffer({"B", 0, 50, MemoryCategory::kTemporary, false});
  const BufferId c = g.add_buffer({"C", 0, 30, MemoryCategory::kTemporary, false});
  const BufferId h = g.add_buffer({"H", 0, 7, MemoryCategory::kHostPinned, false});
  Task ta = host_task("a", StreamClass::kCompute, 10);
  ta.allocates = {a, h};
  Task tb = host_task("b", StreamClass::kCompute, 10);
  tb.allocates = {b};
  tb.frees = {a};
  Task tc = host_task("c", StreamClass::kCompute, 10);
  tc.allocates = {c};
  tc.frees = {b, c};
  g.add_task(ta);
  g.add_task(tb);
  g.add_task(tc);
  const MemoryTracker t = run(g);
  const RankMemory& m = t.rank(0);
  EXPECT_EQ(m.peak_device_bytes, 1150);
  EXPECT_EQ(m.peak_time_ns, 10);
  EXPECT_EQ(m.at_peak_bytes[0], 1000);
  EXPECT_EQ(m.at_peak_bytes[1], 100);
  EXPECT_EQ(m.at_peak_bytes[2], 50);
  EXPECT_EQ(m.at_peak_bytes[3], 7);
  EXPECT_EQ(m.live_at_peak, (std::vector<BufferId>{w, a, b}));
  EXPECT_EQ(m.max_bytes[2], 80);  // B and C together during c
  EXPECT_EQ(m.peak_host_pinned_bytes, 7);
  ASSERT_FALSE(m.timeline.empty());
  EXPECT_EQ(m.timeline.front().time_ns, 0);
  EXPECT_EQ(m.timeline.back().time_ns, 30);
  EXPECT_EQ(m.timeline.back().device_bytes, 1000);
}

// Free at the end of one task and allocation at the start of the next at the same instant never
// count together.
TEST(MemoryTracker, FreeBeforeAllocateAtTheSameInstant) {
  TaskGraph g(1, {0});
  const BufferId x = g.add_buffer({"X", 0, 100, MemoryCategory::kActivations, false});
  const BufferId y = g.add_buffer({"Y", 0, 100, MemoryCategory::kActivations, false});
  Task t1 = host_task("t1", StreamClass::kCompute, 10);
  t1.allocates = {x};
  t1.frees = {x};
  Task t2 = host_task("t2", StreamClass::kCompute, 10);
  t2.allocates = {y};
  t2.frees = {y};
  g.add_task(t1);
  g.add_task(t2);
  EXPECT_EQ(run(g).rank(0).peak_device_bytes, 100);
}

TEST(MemoryTracker, PerRankAccounting) {
  TaskGraph g(2, {0, 1});
  const BufferId b0 = g.add_buffer({"B", 0, 10, MemoryCategory::kActivations, false});
  const BufferId b1 = g.add_buffer({"B", 1, 20, MemoryCategory::kActivations, false});
  Task t0 = host_task("t", StreamClass::kCompute, 5);
  t0.allocates = {b0};
  Task t1 = t0;
  t1.rank = 1;
  t1.allocates = {b1};
  g.add_task(t0);
  g.add_task(t1);
  const MemoryTracker t = run(g);
  EXPECT_EQ(t.rank(0).peak_device_bytes, 10);
  EXPECT_EQ(t.rank(1).peak_device_bytes, 20);
}

TEST(MemoryTracker, FreeingBeforeAllocatingIsAnInternalError) {
  TaskGraph g(1, {0});
  const BufferId x = g.add_buffer({"X", 0, 100, MemoryCategory::kActivations, false});
  Task freer = host_task("freer", StreamClass::kCompute, 1);
  freer.frees = {x};
  Task alloc = host_task("alloc", StreamClass::kCompute, 1);
  alloc.allocates = {x};
  g.add_task(freer);
  g.add_task(alloc);
  EXPECT_THROW(run(g), InternalError);
}

TEST(TaskGraphBuffers, RejectsMisuse) {
  TaskGraph g(2, {0});
  EXPECT_THROW(g.add_buffer({"Z", 0, -1, MemoryCategory::kActivations, false}), InputError);
  g.add_buffer({"empty", 0, 0, MemoryCategory::kActivations, false});  // a rank whose experts get no rows
  EXPECT_THROW(g.add_buffer({"Z", 1, 8, MemoryCategory::kActivations, false}), InputError);
  const BufferId x = g.add_buffer({"X", 0, 8, MemoryCategory::kActivations, false});
  EXPECT_THROW(g.add_buffer({"X", 0, 8, MemoryCategory::kActivations, false}), InputError);
  const BufferId w = g.add_buffer({"W", 0, 8, MemoryCategory::kModelStates, true});
  Task t = host_task("a", StreamClass::kCompute, 1);
  t.allocates = {w};
  EXPECT_THROW(g.add_task(t), InputError);  // resident buffers are never allocated by a task
  t.allocates = {99};
  EXPECT_THROW(g.add_task(t), InputError);  // unknown buffer
  t.allocates = {x};
  g.add_task(t);
  Task t2 = host_task("b", StreamClass::kCompute, 1);
  t2.allocates = {x};
  EXPECT_THROW(g.add_task(t2), InputError);  // allocated twice
}

TEST(TaskGraphBuffers, JsonRoundTripKeepsBuffers) {
  TaskGraph g(1, {0});
  const BufferId a = g.add_buffer({"A", 0, 100, MemoryCategory::kActivations, false});
  g.add_buffer({"W", 0, 4096, MemoryCategory::kModelStates, true});
  Task t1 = host_task("t1", StreamClass::kCompute, 10);
  t1.allocates = {a};
  Task t2 = host_task("t2", StreamClass::kCompute, 10);
  t2.frees = {a};
  g.add_task(t1);
  g.add_task(t2);
  const std::string text = export_graph_json(g);
  EXPECT_NE(text.find("\"buffers\""), std::string::npos);
  const TaskGraph back = import_graph_json(text, "mem.json");
  EXPECT_EQ(export_graph_json(back), text);
  EXPECT_EQ(back.num_buffers(), 2u);
  EXPECT_EQ(back.task(0).allocates, std::vector<BufferId>{a});
  // A task referring to a buffer the file does not define is rejected.
  std::string bad = text;
  bad.replace(bad.find("\"allocates\": [\n        0"), 25, "\"allocates\": [\n        7");
  EXPECT_THROW(import_graph_json(bad, "mem.json"), InputError);
}

}  // namespace
}  // namespace moesim
