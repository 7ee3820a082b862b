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

// NCCL's constants (sim/spec/nccl_tuning.h defaults, ns): an all-to-all's Simple base latency;
// ring and tree hop latencies per protocol, NVLink and network.
constexpr double kA2aBase = 8400;

TEST(AlphaBeta, AllToAllInsideOneNode) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // 7 rounds of intra-node peers at 5000 after NCCL's base; 7 * 1.5e6 / 150 = 70000 of bytes.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllToAll, kBytes), ranks(0, 8)), kA2aBase + 7 * 5000 + 70000);
}

TEST(AlphaBeta, AllToAllAcrossTwoNodes) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // 15 rounds, each with a pair across the nodes (10000); bytes: intra 70000, inter 8 * 1.5e6 / 20
  // = 600000 -> max.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllToAll, kBytes), ranks(0, 16)),
            kA2aBase + 15 * 10000 + 600000);
}

TEST(AlphaBeta, AllToAllTakesTheSlowestMember) {
  const ClusterSpec c = two_nodes();
  const std::vector<int> group{0, 1, 2, 8};
  // Bytes: rank 0 intra 2 peers 20000, inter 1 peer 75000; rank 8 inter 3 peers 225000 -> 225000.
  // Latency: 3 rounds, each with a pair across the nodes: 3 x 10000.
  const double expected = kA2aBase + 3 * 10000 + 225000;
  const TaskGraph all(16, ranks(0, 16));
  EXPECT_EQ(AlphaBetaNetwork(all, c).isolated_duration(work(CollectiveOp::kAllToAll, kBytes), group), expected);
  // With only rank 0 simulated, the slower member 8 still sets the time: a collective ends when
  // its slowest member does.
  const TaskGraph only0(16, {0});
  EXPECT_EQ(AlphaBetaNetwork(only0, c).isolated_duration(work(CollectiveOp::kAllToAll, kBytes), group), expected);
}

TEST(AlphaBeta, GroupOfOneIsADeviceCopy) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // launch 1000 + 2 * 1.5e6 / 500 = 1000 + 6000 = 7000.
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllToAll, kBytes), {3}), 7000);
}

TEST(AlphaBeta, AllReduceAsNcclChoosesIt) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // p = 8 in one node, S = 1.2e7, ring traffic 2*7/8 * S = 2.1e7. LL128 (14 us + 14 x 1.9 us +
  // 2.1e7 / (150 x 0.92)) beats Simple (8.4 us + 14 x 3.4 us + 2.1e7 / 150 = 196000) and LL.
  EXPECT_NEAR(static_cast<double>(net.isolated_duration(work(CollectiveOp::kAllReduce, kBytes), ranks(0, 8))),
              14000 + 14 * 1900 + 2.1e7 / (150 * 0.92), 0.5);
  // p = 16 over two nodes, S = 2.4e7: the ring with LL128. Latency 14 us + 26 NVLink steps x
  // 1.9 us + 2N = 4 network steps x (4 us + the network's 10 us); 30/16 x S = 4.5e7 over 8 NICs
  // (160), which is slower than the 7/8 of it that stays on NVLink (150), at 0.92. The tree with
  // LL128 would take 393138 ns, but NCCL's correction of the tree's bandwidth at this size (0.9)
  // makes it look slower when choosing.
  EXPECT_NEAR(static_cast<double>(net.isolated_duration(work(CollectiveOp::kAllReduce, kBytes), ranks(0, 16))),
              14000 + 26 * 1900 + 4 * 14000 + 4.5e7 / (160 * 0.92), 0.5);
}

TEST(AlphaBeta, RingAllGatherAndReduceScatter) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(16, ranks(0, 16));
  const AlphaBetaNetwork net(g, c);
  // p = 8, Simple: 8.4 us + 7 x 3.4 us + 7/8 x 1.2e7 / 150 = 32200 + 70000 (LL128: 27300 + 76087).
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kAllGather, kBytes), ranks(0, 8)), 102200);
  EXPECT_EQ(net.isolated_duration(work(CollectiveOp::kReduceScatter, kBytes), ranks(0, 8)), 102200);
  // p = 16 over two nodes, LL128: 14 intra steps x 1.9 us and 1 network step x (4 us + 10 us)
  // after 14 us; 15/16 x 2.4e7 over 8 NICs x 20 (NVLink carries 7/8 of it at 150) at 0.92.
  EXPECT_NEAR(static_cast<double>(net.isolated_duration(work(CollectiveOp::kAllGather, kBytes), ranks(0, 16))),
              14000 + 14 * 1900 + 14000 + 2.25e7 / (160 * 0.92), 0.5);
}

TEST(AlphaBeta, WorldLargerThanClusterIsInputError) {
  const ClusterSpec c = two_nodes();
  const TaskGraph g(32, {0});
  EXPECT_THROW(AlphaBetaNetwork(g, c), InputError);
}

// A running all-to-all over {0, 1} slows to the minimum factor over its simulated ranks.
// Isolated: NCCL's latency 8400 + 5000 = 13400 ns, then 1.5e6 / 150 = 10000 ns of bytes. Rank 0
// also computes: communication-with-computation = 0.72 (default table) slows the bytes, not the
// latency: 13400 + ceil(10000 / 0.72) = 27289.
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
  EXPECT_EQ(net.next_completion(), 27289);
  // At 7200, still within the latency, compute stops: the bytes then move at full speed -> 23400.
  busy.add(0, StreamClass::kCompute, -1);
  const int changed[] = {0};
  net.on_concurrency_change(changed, 7200, busy);
  EXPECT_EQ(net.next_completion(), 23400);
  std::vector<TaskIndex> done;
  net.advance_to(23400, done);
  EXPECT_EQ(done, std::vector<TaskIndex>{i});
  EXPECT_EQ(net.next_completion(), kNever);
}

}  // namespace
}  // namespace moesim
