// The golden-timeline text (sim/report/timeline.h): rank lists, line order, memory lines.
#include "sim/report/timeline.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/core/error.h"
#include "tests/sim/task_builders.h"

namespace moesim {
namespace {

using testing::all_to_all_task;
using testing::host_task;

TEST(CompactRankList, RunsOfThreeOrMoreBecomeRanges) {
  EXPECT_EQ(compact_rank_list({}), "");
  EXPECT_EQ(compact_rank_list({5}), "5");
  EXPECT_EQ(compact_rank_list({0, 1}), "0,1");
  EXPECT_EQ(compact_rank_list({0, 1, 2, 3, 4, 5, 6, 7}), "0-7");
  EXPECT_EQ(compact_rank_list({0, 8, 16}), "0,8,16");
  EXPECT_EQ(compact_rank_list({0, 1, 2, 4, 6, 7, 8, 9}), "0-2,4,6-9");
}

std::string timeline_of(const TaskGraph& g, const Trace& tr, const std::vector<RankMemory>& memory = {}) {
  std::ostringstream out;
  write_timeline(out, g, tr, memory);
  return out.str();
}

// Two graphs with the same tasks added in another order write the same text: lines are sorted
// by start, end, ranks, stream and id.
TEST(Timeline, LinesSortedIndependentlyOfTaskOrder) {
  TaskGraph a(4, {0, 1, 2, 3});
  const GroupId ga = a.add_group({3, 0, 2, 1});  // listed in any order, kept sorted
  a.add_task(host_task("late", 1, StreamClass::kCompute, 5));
  a.add_task(all_to_all_task("a2a", ga, 64));
  a.add_task(host_task("early", 0, StreamClass::kCompute, 5));
  Trace ta;
  ta.records = {{0, 20, 25}, {0, 5, 20}, {0, 0, 5}};

  TaskGraph b(4, {0, 1, 2, 3});
  const GroupId gb = b.add_group({0, 1, 2, 3});
  b.add_task(host_task("early", 0, StreamClass::kCompute, 5));
  b.add_task(all_to_all_task("a2a", gb, 64));
  b.add_task(host_task("late", 1, StreamClass::kCompute, 5));
  Trace tb;
  tb.records = {{0, 0, 5}, {0, 5, 20}, {0, 20, 25}};

  const std::string text = timeline_of(a, ta);
  EXPECT_EQ(text, timeline_of(b, tb));
  const std::string body =
      "step_ns 25\n"
      "tasks 3 simulated_ranks 0-3 of 4\n"
      "task 0 5 0 compute early\n"
      "task 5 20 0-3 comm.dispatch a2a\n"
      "task 20 25 1 compute late\n";
  EXPECT_NE(text.find(body), std::string::npos) << text;
  EXPECT_EQ(text.rfind("# moesim timeline v1\n", 0), 0u);
}

TEST(Timeline, TiesBrokenByRankThenStreamThenId) {
  TaskGraph g(2, {0, 1});
  g.add_task(host_task("b", 1, StreamClass::kCompute, 5));
  g.add_task(host_task("z", 0, StreamClass::kCopyD2H, 5));
  g.add_task(host_task("y", 0, StreamClass::kCompute, 5));
  g.add_task(host_task("x", 0, StreamClass::kCompute, 5));
  Trace tr;
  tr.records = {{0, 0, 5}, {0, 0, 5}, {0, 0, 5}, {0, 0, 5}};
  const std::string text = timeline_of(g, tr);
  const auto at = [&](const char* line) { return text.find(line); };
  EXPECT_LT(at("task 0 5 0 compute x\n"), at("task 0 5 0 compute y\n"));
  EXPECT_LT(at("task 0 5 0 compute y\n"), at("task 0 5 0 copy.d2h z\n"));
  EXPECT_LT(at("task 0 5 0 copy.d2h z\n"), at("task 0 5 1 compute b\n"));
}

TEST(Timeline, MemoryLinePerRankWithDeviceBreakdown) {
  TaskGraph g(1, {0});
  g.add_task(host_task("t", 0, StreamClass::kCompute, 5));
  Trace tr;
  tr.records = {{0, 0, 5}};
  RankMemory m;
  m.rank = 0;
  m.peak_device_bytes = 700;
  m.peak_time_ns = 3;
  m.at_peak_bytes = {100, 200, 400, 0};
  m.peak_host_pinned_bytes = 50;
  EXPECT_NE(timeline_of(g, tr, {m}).find("memory rank 0 peak_device_bytes 700 at_ns 3 model_states 100 "
                                         "activations 200 temporary 400 peak_host_pinned_bytes 50\n"),
            std::string::npos);
}

TEST(Timeline, TraceOfAnotherGraphIsABug) {
  TaskGraph g(1, {0});
  g.add_task(host_task("t", 0, StreamClass::kCompute, 5));
  EXPECT_THROW(timeline_of(g, Trace{}), InternalError);
}

}  // namespace
}  // namespace moesim
