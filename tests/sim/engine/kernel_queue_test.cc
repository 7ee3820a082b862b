// KernelQueue in the engine: copies that run on the SMs queue behind the kernels that reached the
// GPU before them (sim/engine/kernel_queue.h). Every task is a fixed-duration task; the roles are
// given by hand, so the times below follow from the rule alone.
#include "sim/engine/kernel_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sim/engine/engine.h"
#include "sim/engine/trace_recorder.h"
#include "../task_builders.h"
#include "fixed_model.h"

namespace moesim {
namespace {

using testing::FixedModel;
using testing::host_task;

constexpr KernelRole kHolds = KernelRole::kHoldsSms;
constexpr KernelRole kQueues = KernelRole::kQueuesBehind;
constexpr KernelRole kNone = KernelRole::kNone;

Trace run(const TaskGraph& g, std::vector<KernelRole> roles, std::vector<int> device_of_rank = {},
          const HostIssueSpec* host = nullptr) {
  Engine engine(g);
  engine.add_model(std::make_unique<FixedModel>(g, "fixed", [](const Task&) { return true; }));
  if (!device_of_rank.empty()) engine.share_devices(std::move(device_of_rank));
  if (host != nullptr) engine.issue_from_host(*host);
  engine.queue_kernels(std::move(roles));
  TraceRecorder rec(g.num_tasks());
  engine.add_observer(&rec);
  engine.run();
  return rec.take();
}

// A GEMM of 1000 ns runs from 0. A copy of 14 ns becomes ready at 40, released by a task on
// another stream: it arrived after the GEMM, so it is issued at 40 and copies from 1000 to 1014.
TEST(KernelQueue, CopyArrivingDuringAGemmWaitsForItsEnd) {
  TaskGraph g(1, {0});
  const auto gemm = g.add_task(host_task("gemm", 0, StreamClass::kCompute, 1000));
  const auto host = g.add_task(host_task("host", 0, StreamClass::kCommCombine, 40));
  const auto copy = g.add_task(host_task("copy", 0, StreamClass::kCommDispatch, 14));
  g.add_dependency(host, copy);
  const Trace t = run(g, {kHolds, kNone, kQueues});
  EXPECT_EQ(t.records[gemm].end_ns, 1000);
  EXPECT_EQ(t.records[copy].ready_ns, 40);
  EXPECT_EQ(t.records[copy].start_ns, 40);
  EXPECT_EQ(t.records[copy].end_ns, 1014);
}

// Without roles nothing waits: the same copy runs from 40 to 54.
TEST(KernelQueue, WithoutRolesCopiesOverlapGemms) {
  TaskGraph g(1, {0});
  g.add_task(host_task("gemm", 0, StreamClass::kCompute, 1000));
  const auto host = g.add_task(host_task("host", 0, StreamClass::kCommCombine, 40));
  const auto copy = g.add_task(host_task("copy", 0, StreamClass::kCommDispatch, 14));
  g.add_dependency(host, copy);
  const Trace t = run(g, {kNone, kNone, kNone});
  EXPECT_EQ(t.records[copy].end_ns, 54);
}

// Copies queued on their stream from the start (arrival 0) go before a GEMM released at 100 by
// the first of them: the second copy, ready at 100 while the GEMM runs, does not wait.
TEST(KernelQueue, CopiesQueuedBeforeTheGemmArrivedDoNotWait) {
  TaskGraph g(1, {0});
  const auto first = g.add_task(host_task("copy.c0", 0, StreamClass::kCommDispatch, 100));
  const auto second = g.add_task(host_task("copy.c1", 0, StreamClass::kCommDispatch, 14));
  const auto gemm = g.add_task(host_task("gemm", 0, StreamClass::kCompute, 1000));
  g.add_dependency(first, gemm);
  const Trace t = run(g, {kQueues, kQueues, kHolds});
  EXPECT_EQ(t.records[gemm].start_ns, 100);
  EXPECT_EQ(t.records[second].start_ns, 100);
  EXPECT_EQ(t.records[second].end_ns, 114);
}

// fc2 (0-500) is followed on the compute stream by the next chunk's fc1, whose dispatch ended at
// 10; fc2's combine is released when fc2 ends. Both can start at 500, but fc1 arrived at 10 and
// the combine at 500: the combine copies after fc1 (500-1000), 1000 to 1014.
TEST(KernelQueue, CombineWaitsForTheNextGemmThatArrivedFirst) {
  TaskGraph g(1, {0});
  const auto dispatch = g.add_task(host_task("dispatch.c1", 0, StreamClass::kCommDispatch, 10));
  const auto fc2 = g.add_task(host_task("fc2.c0", 0, StreamClass::kCompute, 500));
  const auto fc1 = g.add_task(host_task("fc1.c1", 0, StreamClass::kCompute, 500));
  const auto combine = g.add_task(host_task("combine.c0", 0, StreamClass::kCommCombine, 14));
  g.add_dependency(dispatch, fc1);
  g.add_dependency(fc2, combine);
  const Trace t = run(g, {kQueues, kHolds, kHolds, kQueues});
  EXPECT_EQ(t.records[dispatch].end_ns, 10);  // it arrived at 0, before fc2 held the SMs
  EXPECT_EQ(t.records[fc1].start_ns, 500);
  EXPECT_EQ(t.records[combine].start_ns, 500);
  EXPECT_EQ(t.records[combine].end_ns, 1014);
}

// Two virtual ranks on one GPU run GEMMs of 300 and 700 ns; a copy arriving at 40 waits for both
// (700 to 714). On two GPUs the other rank's GEMM does not hold it (300 to 314). A GEMM that
// starts while the copy waits (rank 1's second, released at 100) does not prolong the wait.
TEST(KernelQueue, CopyWaitsForEveryEarlierKernelOfItsDeviceOnly) {
  TaskGraph g(2, {0, 1});
  g.add_task(host_task("gemm.r0", 0, StreamClass::kCompute, 300));
  g.add_task(host_task("gemm.r1", 1, StreamClass::kCompute, 700));
  const auto host = g.add_task(host_task("host", 0, StreamClass::kCommCombine, 40));
  const auto copy = g.add_task(host_task("copy", 0, StreamClass::kCommDispatch, 14));
  const auto late_host = g.add_task(host_task("late.host", 1, StreamClass::kCommCombine, 100));
  const auto late = g.add_task(host_task("late.gemm", 1, StreamClass::kCommGrad, 2000));
  g.add_dependency(host, copy);
  g.add_dependency(late_host, late);
  const std::vector<KernelRole> roles{kHolds, kHolds, kNone, kQueues, kNone, kHolds};
  const Trace one_gpu = run(g, roles, {0, 0});
  EXPECT_EQ(one_gpu.records[late].start_ns, 100);
  EXPECT_EQ(one_gpu.records[copy].start_ns, 40);
  EXPECT_EQ(one_gpu.records[copy].end_ns, 714);
  const Trace two_gpus = run(g, roles);
  EXPECT_EQ(two_gpus.records[copy].end_ns, 314);
}

// Two GPUs: an all-to-all over both (100 ns) released by rank 0's encode (10 ns) and rank 1's
// (`encode1` ns), and GEMMs, each on its rank's own stream, queued from the start or released by a
// host task of `release` ns on its rank. Returns the trace, the all-to-all's and the GEMMs' indices.
struct Gemm {
  int rank;
  TimeNs release, ns;  // release 0: queued from the start
};
struct TwoGpus {
  Trace trace;
  TaskIndex a2a;
  std::vector<TaskIndex> gemms;
};
TwoGpus collective_beside_gemms(TimeNs encode1, const std::vector<Gemm>& gemms) {
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  std::vector<KernelRole> roles;
  auto add = [&](Task t, KernelRole role) {
    roles.push_back(role);
    return g.add_task(std::move(t));
  };
  const auto encode0 = add(host_task("encode.r0", 0, StreamClass::kCommCombine, 10), kNone);
  const auto encode1_task = add(host_task("encode.r1", 1, StreamClass::kCommCombine, encode1), kNone);
  TwoGpus out;
  for (const Gemm& m : gemms) {
    const std::string r = std::to_string(m.rank) + "." + std::to_string(out.gemms.size());
    const auto gemm = add(host_task("gemm.r" + r, m.rank, StreamClass::kCompute, m.ns), kHolds);
    if (m.release > 0)
      g.add_dependency(add(host_task("host.r" + r, m.rank, StreamClass::kCommGrad, m.release), kNone), gemm);
    out.gemms.push_back(gemm);
  }
  out.a2a = add(testing::all_to_all_task("a2a", both, 1000), kQueues);
  g.add_dependency(encode0, out.a2a);
  g.add_dependency(encode1_task, out.a2a);
  out.trace = run(g, std::move(roles));
  return out;
}

// A collective between two GPUs is one kernel per GPU, each arriving on its own. GPU 0's part is
// released at 10; a GEMM released at 50 on GPU 0 runs from 50 to 1050 (it arrived after). GPU 1's
// part is released at 200, while a GEMM queued there from the start runs from 0 to 500. The
// collective waits for GPU 1's GEMM only: 500 to 600 (with one arrival for the whole collective,
// 200, it would wait for GPU 0's GEMM too, to 1150).
TEST(KernelQueue, ACollectiveArrivesOnEachGpuOnItsOwn) {
  const TwoGpus t = collective_beside_gemms(200, {{0, 50, 1000}, {1, 0, 500}});
  EXPECT_EQ(t.trace.records[t.gemms[0]].start_ns, 50);
  EXPECT_EQ(t.trace.records[t.gemms[1]].end_ns, 500);
  EXPECT_EQ(t.trace.records[t.a2a].start_ns, 200);  // issued when ready, as the runtime's events time it
  EXPECT_EQ(t.trace.records[t.a2a].end_ns, 600);
}

// A collective's kernel on a GPU waits for the GEMMs that arrived there before it: GPU 1's GEMM,
// released at 100, runs from 100 to 1100; the collective's part on GPU 1 arrives at 200 (after
// the GEMM), on GPU 0 at 10. It waits for GPU 1's GEMM: 1100 to 1200 (taking the earlier of its
// arrivals, 10, it would not).
TEST(KernelQueue, ACollectiveWaitsForWhatArrivedBeforeItsOwnPartOnEachGpu) {
  const TwoGpus t = collective_beside_gemms(200, {{1, 100, 1000}});
  EXPECT_EQ(t.trace.records[t.gemms[0]].start_ns, 100);
  EXPECT_EQ(t.trace.records[t.a2a].start_ns, 200);
  EXPECT_EQ(t.trace.records[t.a2a].end_ns, 1200);
}

// With host launches (sim/engine/host_issue.h, 10 ns each), a collective's kernel arrives on each
// GPU when that GPU's host launched it: rank 0's host launches it at 10 and then a GEMM at 20
// (20 to 1020); rank 1's host first launches a task of 190 ns, the collective at 200. The
// collective is issued at 200 (its last launch) and does not wait for GPU 0's GEMM, which arrived
// after its part there: 200 to 300 (with one arrival for both GPUs, 200, it would end at 1120).
TEST(KernelQueue, AHostLaunchedCollectiveArrivesOnEachGpuAtItsOwnLaunch) {
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  g.add_task(host_task("before.r1", 1, StreamClass::kCompute, 1));
  const auto a2a = g.add_task(testing::all_to_all_task("a2a", both, 1000));
  const auto gemm0 = g.add_task(host_task("gemm.r0", 0, StreamClass::kCompute, 1000));
  const HostIssueSpec launches{{190, 10, 10}, {}, {}};
  const Trace t = run(g, {kNone, kQueues, kHolds}, {}, &launches);
  EXPECT_EQ(t.records[gemm0].start_ns, 20);
  EXPECT_EQ(t.records[a2a].start_ns, 200);
  EXPECT_EQ(t.records[a2a].end_ns, 300);
}

}  // namespace
}  // namespace moesim
