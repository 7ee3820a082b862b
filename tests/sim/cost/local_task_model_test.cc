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

TEST(LocalTaskModel, HandlesEveryNonCollectiveTask) {
  const ClusterSpec c = one_gpu();
  TaskGraph g(1, {0});
  LocalTaskModel m(g, c);
  Task t;
  t.work = HostWork{1};
  EXPECT_TRUE(m.handles(t));
  t.work = CollectiveWork{};
  EXPECT_FALSE(m.handles(t));
  EXPECT_EQ(m.name(), "local");
}

// A d2h copy of 10000 B (1000 ns isolated) overlapping compute: memcpy-with-computation = 0.98.
// ceil(1000 / 0.98) = ceil(1020.4) = 1021. When compute stops at 510 it has done
// 510 * 0.98 = 499.8 ns of work; 500.2 remain at full speed -> ceil -> 510 + 501 = 1011.
TEST(LocalTaskModel, RateFollowsConcurrency) {
  const ClusterSpec c = one_gpu();
  TaskGraph g(1, {0});
  Task copy;
  copy.id = "offload";
  copy.stream = StreamClass::kCopyD2H;
  copy.work = CopyWork{10000, CopyDirection::kDeviceToHost};
  const TaskIndex i = g.add_task(copy);
  LocalTaskModel m(g, c);
  Concurrency busy(1);
  busy.add(0, StreamClass::kCopyD2H, 1);
  busy.add(0, StreamClass::kCompute, 1);
  m.start(i, 0, busy);
  EXPECT_EQ(m.next_completion(), 1021);
  busy.add(0, StreamClass::kCompute, -1);
  const int ranks[] = {0};
  m.on_concurrency_change(ranks, 510, busy);
  EXPECT_EQ(m.next_completion(), 1011);
  std::vector<TaskIndex> done;
  m.advance_to(1011, done);
  EXPECT_EQ(done, std::vector<TaskIndex>{i});
}

}  // namespace
}  // namespace moesim
