// KernelQueue in the engine: copies that run on the SMs queue behind the kernels that reached the
// GPU before them (sim/engine/kernel_queue.h). Every task is a fixed-duration task; the roles are
// given by hand, so the times below follow from the rule alone.
#include "sim/engine/kernel_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "sim/engine/engine.h"
#include "sim/engine/trace.h"
#include "../task_builders.h"
#include "fixed_model.h"

namespace moesim {
namespace {

using testing::FixedModel;
using testing::host_task;

constexpr KernelRole kHolds = KernelRole::kHoldsSms;
constexpr KernelRole kQueues = KernelRole::kQueuesBehind;
constexpr KernelRole kNone = KernelRole::kNone;

Trace run(const TaskGraph& g, std::vector<KernelRole> roles, std::vector<int> device_of_rank = {}) {
  Engine engine(g);
  engine.add_model(std::make_unique<FixedModel>(g, "fixed", [](const Task&) { return true; }));
  if (!device_of_rank.empty()) engine.share_devices(std::move(device_of_rank));
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

// A collective between two GPUs (default 100 ns) is one kernel per GPU, each arriving on its
// own. GPU 0's part is released at 10 by rank 0's encode; a GEMM released at 50 on GPU 0 runs
// from 50 to 1050 (it arrived after). GPU 1's part is released at 200 by rank 1's encode, while
// a GEMM queued there from the start runs from 0 to 500. The collective waits for GPU 1's GEMM
// only: 500 to 600 (with one arrival for the whole collective, 200, it would wait for GPU 0's
// GEMM too, to 1050).
TEST(KernelQueue, ACollectiveArrivesOnEachGpuOnItsOwn) {
  TaskGraph g(2, {0, 1});
  const GroupId both = g.add_group({0, 1});
  const auto encode0 = g.add_task(host_task("encode.r0", 0, StreamClass::kCompute, 10));
  const auto late_host = g.add_task(host_task("host.r0", 0, StreamClass::kCommCombine, 50));
  const auto gemm0 = g.add_task(host_task("gemm.r0", 0, StreamClass::kCommGrad, 1000));
  const auto gemm1 = g.add_task(host_task("gemm.r1", 1, StreamClass::kCompute, 500));
  const auto encode1 = g.add_task(host_task("encode.r1", 1, StreamClass::kCommCombine, 200));
  const auto a2a = g.add_task(testing::all_to_all_task("a2a", both, 1000));
  g.add_dependency(encode0, a2a);
  g.add_dependency(encode1, a2a);
  g.add_dependency(late_host, gemm0);
  const Trace t = run(g, {kNone, kNone, kHolds, kHolds, kNone, kQueues});
  EXPECT_EQ(t.records[gemm0].start_ns, 50);
  EXPECT_EQ(t.records[gemm1].end_ns, 500);
  EXPECT_EQ(t.records[a2a].start_ns, 200);  // issued when ready, as the runtime's events time it
  EXPECT_EQ(t.records[a2a].end_ns, 600);
}

}  // namespace
}  // namespace moesim
