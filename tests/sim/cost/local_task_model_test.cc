#include "sim/cost/local_task_model.h"

#include <gtest/gtest.h>

namespace moesim {
namespace {

ClusterSpec one_gpu() {
  ClusterSpec c;
  c.name = "one";
  c.node.gpus_per_node = 1;
  c.node.gpu.name = "TestGPU";
  c.node.gpu.peak_flops = {{DType::kFp32, 1e12}};
  c.node.gpu.sm_count = 108;
  c.node.gpu.hbm_bandwidth = 1e12;
  c.node.gpu.hbm_efficiency = 1.0;
  c.node.pcie_d2h = {1e10, 1.0, 0};  // 10 B/ns
  return c;
}

TEST(LocalTaskModel, HandlesEveryTaskButCollectivesAndHostCopies) {
  const ClusterSpec c = one_gpu();
  TaskGraph g(1, {0});
  LocalTaskModel m(g, c);
  Task t;
  t.work = HostWork{1};
  EXPECT_TRUE(m.handles(t));
  t.work = CopyWork{1, CopyDirection::kDeviceToDevice};
  EXPECT_TRUE(m.handles(t));
  t.work = CopyWork{1, CopyDirection::kDeviceToHost};
  EXPECT_FALSE(m.handles(t));  // HostCopyModel's
  t.work = CollectiveWork{};
  EXPECT_FALSE(m.handles(t));
  EXPECT_EQ(m.name(), "local");
}

// A 1000 ns host task on the compute stream overlapping communication: computation with
// communication = 0.96. ceil(1000 / 0.96) = ceil(1041.67) = 1042. When communication stops at 480
// it has done 480 * 0.96 = 460.8 ns of work; 539.2 remain at full speed -> 480 + 540 = 1020.
TEST(LocalTaskModel, RateFollowsConcurrency) {
  const ClusterSpec c = one_gpu();
  TaskGraph g(1, {0});
  Task work;
  work.id = "work";
  work.stream = StreamClass::kCompute;
  work.work = HostWork{1000};
  const TaskIndex i = g.add_task(work);
  LocalTaskModel m(g, c);
  Concurrency busy(1);
  busy.add(0, StreamClass::kCompute, 1);
  busy.add(0, StreamClass::kCommDispatch, 1);
  m.start(i, 0, busy);
  EXPECT_EQ(m.next_completion(), 1042);
  busy.add(0, StreamClass::kCommDispatch, -1);
  const int ranks[] = {0};
  m.on_concurrency_change(ranks, 480, busy);
  EXPECT_EQ(m.next_completion(), 1020);
  std::vector<TaskIndex> done;
  m.advance_to(1020, done);
  EXPECT_EQ(done, std::vector<TaskIndex>{i});
}

}  // namespace
}  // namespace moesim
