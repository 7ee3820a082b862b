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

// Beside communication a tensor-core GEMM reads the node's GEMM-size table at batch x m x n /
// sm_count output elements per SM, a fp32 GEMM (no tensor cores) and a host task keep the cell.
// 4 x 108 x 100 outputs over 108 SMs: 400 per SM, between rows 100 (0.5) and 1600 (0.9): 0.7.
TEST(LocalTaskModel, TensorCoreGemmsBesideCommunicationGoBySize) {
  ClusterSpec c = one_gpu();
  c.node.gpu.peak_flops[DType::kBf16] = 1e12;
  c.node.interference.gemm_with_communication = {{100, 0.5}, {1600, 0.9}};
  const double cell = c.node.interference.factors[1][0];  // computation with communication: 0.96
  TaskGraph g(1, {0});
  const auto add = [&](const char* id, Work work) {
    Task t;
    t.id = id;
    t.stream = StreamClass::kCompute;
    t.work = work;
    return g.add_task(t);
  };
  const TaskIndex bf16 = add("bf16", GemmWork{4, 108, 100, 64, DType::kBf16, 2});
  const TaskIndex fp32 = add("fp32", GemmWork{4, 108, 100, 64, DType::kFp32, 4});
  const TaskIndex host = add("host", HostWork{1000});
  LocalTaskModel m(g, c);
  Concurrency busy(1);
  busy.add(0, StreamClass::kCompute, 1);
  busy.add(0, StreamClass::kCommDispatch, 1);
  const auto finish_at = [&](TaskIndex i) {
    LocalTaskModel alone(g, c);
    alone.start(i, 0, busy);
    return alone.next_completion();
  };
  const auto isolated = [&](TaskIndex i) { return static_cast<double>(m.cost().isolated_duration(g.task(i))); };
  EXPECT_NEAR(static_cast<double>(finish_at(bf16)), isolated(bf16) / 0.7, 1.0);
  EXPECT_NEAR(static_cast<double>(finish_at(fp32)), isolated(fp32) / cell, 1.0);
  EXPECT_NEAR(static_cast<double>(finish_at(host)), 1000 / cell, 1.0);
}

}  // namespace
}  // namespace moesim
