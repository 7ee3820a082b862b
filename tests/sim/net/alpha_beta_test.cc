#include "sim/net/alpha_beta.h"

#include <gtest/gtest.h>

#include <numeric>

#include "sim/core/error.h"

namespace moesim {
namespace {

// Two nodes of 8 GPUs. NVLink 2e11 x 0.75 = 1.5e11 B/s = 150 B/ns, 5000 ns latency; NIC
// 2.5e10 x 0.8 = 2e10 B/s = 20 B/ns, 10000 ns latency; HBM 1e12 x 0.5 = 500 B/ns, launch 1000 ns.
ClusterSpec two_nodes() {
  ClusterSpec c;
  c.name = "2x8";
  c.num_nodes = 2;
  c.node.name = "node8";
  c.node.gpus_per_node = 8;
  c.node.gpu.name = "TestGPU";
  c.node.gpu.peak_flops = {{DType::kFp32, 1e13}};
  c.node.gpu.hbm_bandwidth = 1e12;
  c.node.gpu.hbm_efficiency = 0.5;
  c.node.gpu.kernel_launch_ns = 1000;
  c.node.gpu.sm_count = 108;
  c.node.intra_node = {2e11, 0.75, 5000};
  c.inter_node = {2.5e10, 0.8, 10000};
  return c;
}

std::vector<int> ranks(int first, int count) {
  std::vector<int> r(static_cast<std::size_t>(count));
  std::iota(r.begin(), r.end(), first);
  return r;
}

CollectiveWork work(CollectiveOp op, std::int64_t bytes) { return CollectiveWork{op, 0, bytes}; }

constexpr std::int64_t kBytes = 1500000;

TEST(AlphaBeta, AllToAllInsideOneNode) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // 7 intra peers: 5000 + 7 * 1.5e6 / 150 = 5000 + 70000 = 75000; no inter peers.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllToAll, kBytes), ranks(0, 8)), 75000);
}

TEST(AlphaBeta, AllToAllAcrossTwoNodes) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // intra: 75000 as above; inter: 10000 + 8 * 1.5e6 / 20 = 10000 + 600000 = 610000 -> max.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllToAll, kBytes), ranks(0, 16)), 610000);
}

TEST(AlphaBeta, AllToAllTakesTheSlowestMember) {
  const ClusterSpec c = two_nodes();
  const std::vector<int> group{0, 1, 2, 8};
  // Rank 0: intra 2 peers 5000 + 20000 = 25000, inter 1 peer 10000 + 75000 = 85000 -> 85000.
  // Rank 8: no intra peer, inter 3 peers 10000 + 225000 = 235000.
  const TaskGraph all(16, ranks(0, 16));
  EXPECT_EQ(AlphaBetaNetwork(all, c).isolated_duration(work(CollectiveOp::kAllToAll, kBytes), group),
            235000);
  // With only rank 0 simulated, the slower member 8 still sets the time: a collective ends when
  // its slowest member does.
  const TaskGraph only0(16, {0});
  EXPECT_EQ(AlphaBetaNetwork(only0, c).isolated_duration(work(CollectiveOp::kAllToAll, kBytes), group),
            235000);
}

TEST(AlphaBeta, GroupOfOneIsADeviceCopy) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // launch 1000 + 2 * 1.5e6 / 500 = 1000 + 6000 = 7000.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllToAll, kBytes), {3}), 7000);
}

TEST(AlphaBeta, RingAllReduce) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // p = 8 in one node, S = 1.2e7: 2*7*5000 + 2*7/8 * 1.2e7 / 150 = 70000 + 140000 = 210000.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllReduce, kBytes), ranks(0, 8)), 210000);
  // p = 16 over two nodes, S = 2.4e7: 2*15*10000 + 2*15/16 * 2.4e7 / 20 = 300000 + 2250000.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllReduce, kBytes), ranks(0, 16)), 2550000);
}

TEST(AlphaBeta, RingAllGatherAndReduceScatter) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // p = 8: 7*5000 + 7/8 * 1.2e7 / 150 = 35000 + 70000 = 105000.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllGather, kBytes), ranks(0, 8)), 105000);
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kReduceScatter, kBytes), ranks(0, 8)), 105000);
  // p = 16: 15*10000 + 15/16 * 2.4e7 / 20 = 150000 + 1125000 = 1275000.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllGather, kBytes), ranks(0, 16)), 1275000);
}

TEST(AlphaBeta, WorldLargerThanClusterIsInputError) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(32, {0});
  EXPECT_THROW(AlphaBetaNetwork(g, c), InputError);
}

// A running all-to-all over {0, 1} slows to the minimum factor over its simulated ranks.
// Isolated: 5000 + 1.5e6 / 150 = 15000 ns. Rank 0 also computes: communication-with-computation
// = 0.72 (default table) -> ceil(15000 / 0.72) = 20834.
TEST(AlphaBeta, CollectiveRunsAtItsSlowestMembersFactor) {
  const ClusterSpec c = two_nodes();
  TaskGraph g(16, {0, 1});
  const GroupId pair = g.add_group({0, 1});
  Task t;
  t.id = "dispatch";
  t.rank = -1;
  t.stream = StreamClass::kCommDispatch;
  t.work = CollectiveWork{CollectiveOp::kAllToAll, pair, kBytes};
  const TaskIndex i = g.add_task(t);
  AlphaBetaNetwork net(g, c);
  EXPECT_TRUE(net.handles(g.task(i)));
  Concurrency busy(16);
  busy.add(0, StreamClass::kCommDispatch, 1);
  busy.add(1, StreamClass::kCommDispatch, 1);
  busy.add(0, StreamClass::kCompute, 1);
  net.start(i, 0, busy);
  EXPECT_EQ(net.next_completion(), 20834);
  // At 7200, 7200 * 0.72 = 5184 ns of work are done; compute stops: 9816 left -> 17016.
  busy.add(0, StreamClass::kCompute, -1);
  const int changed[] = {0};
  net.on_concurrency_change(changed, 7200, busy);
  EXPECT_EQ(net.next_completion(), 17016);
  std::vector<TaskIndex> done;
  net.advance_to(17016, done);
  EXPECT_EQ(done, std::vector<TaskIndex>{i});
  EXPECT_EQ(net.next_completion(), kNever);
}

}  // namespace
}  // namespace moesim
