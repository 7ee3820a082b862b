// Collectives as NCCL runs them, in the flow model (sim/net/tuned_plan.h): rings that spread over
// every NIC, trees, and the network's latency from the cluster file. That both models agree on
// isolated times is FlowCollectives.AlphaBetaAndFlowAgreeWithoutContention.
#include "sim/net/tuned_plan.h"

#include <gtest/gtest.h>

#include <vector>

#include "sim/net/nccl_model.h"
#include "tests/sim/net/net_test_util.h"

namespace moesim {
namespace {

using net_test::iota;
using net_test::preset;
using net_test::run;

TimeNs flow_time(const ClusterSpec& c, CollectiveOp op, std::int64_t b, const std::vector<int>& group) {
  const ClusterTopology t(c);
  return run(t, plan_collective(t, c, CollectiveWork{op, 0, b}, group, {}));
}

TEST(TunedPlan, RingsAcrossNodesUseEveryNic) {
  // 2 x DGX A100, 8 NICs of 23.5 GB/s per node: the 8 rings leave each node through 8 NICs, so a
  // large all-reduce reaches min(NVLink 231, 8 x 23.5 = 188) GB/s of bus bandwidth, not one NIC's.
  ClusterSpec c = preset("clusters/dgx-a100-2node.yaml");
  c.node.nccl.algorithms = {true, false};
  const std::int64_t b = 64 * kMiB;  // per rank; S = 16 b
  const double t = static_cast<double>(flow_time(c, CollectiveOp::kAllReduce, b, iota(16)));
  const double busbw = static_cast<double>(b) * 16 / t * 2 * 15 / 16;
  EXPECT_NEAR(busbw, 8 * 23.5, 0.03 * 8 * 23.5);
  // With one channel, one NIC.
  c.node.nccl.channels = 1;
  const double one = static_cast<double>(flow_time(c, CollectiveOp::kAllReduce, b, iota(16)));
  EXPECT_NEAR(t / one, 1.0 / 8, 0.01);
}

TEST(TunedPlan, TreeAcrossTwoNodesSendsEachNodeSOnce) {
  // The tree over two nodes moves S out of each node (its half-tree's share up, the other's down),
  // where a ring moves 2(p-1)/p S: across a slow network it is nearly twice as fast for large S.
  ClusterSpec c = preset("clusters/dgx-a100-2node.yaml");
  c.inter_node.bandwidth /= 4;  // the NICs far slower than NVLink
  c.node.topology.nic_port.bandwidth /= 4;
  const std::int64_t b = 64 * kMiB;
  c.node.nccl.algorithms = {false, true};
  const double tree = static_cast<double>(flow_time(c, CollectiveOp::kAllReduce, b, iota(16)));
  c.node.nccl.algorithms = {true, false};
  const double ring = static_cast<double>(flow_time(c, CollectiveOp::kAllReduce, b, iota(16)));
  // Tree: S / (8 NICs x 5.875 GB/s) / 0.92; ring: 30/16 S / (8 x 5.875).
  EXPECT_NEAR(ring / tree, 30.0 / 16 * 0.92, 0.03);
  // NCCL's choice takes the tree here.
  c.node.nccl.algorithms = {true, true};
  const NcclGroup shape = nccl_group(iota(16), 8);
  EXPECT_EQ(choose_nccl(c.node.nccl, CollectiveOp::kAllReduce, 16.0 * b, shape, nccl_links(c, shape)).algorithm,
            NcclAlgorithm::kTree);
  EXPECT_NEAR(static_cast<double>(flow_time(c, CollectiveOp::kAllReduce, b, iota(16))), tree, 1.0);
}

TEST(TunedPlan, FlowModelPaysTheClustersInterNodeLatency) {
  // The cluster file's inter_node.latency reaches the flow model: every message between nodes
  // takes at least that long, whatever the NIC port says.
  ClusterSpec c = preset("clusters/dgx-a100-2node.yaml");
  c.inter_node.latency_ns = 20000;
  const ClusterTopology t(c);
  EXPECT_EQ(t.route_latency(0, 8), 20000);
  EXPECT_EQ(t.route_latency(0, 1), 3000);
  // An all-to-all over both nodes: 15 rounds, each with a pair across them.
  const CollectivePlan plan = plan_collective(t, c, CollectiveWork{CollectiveOp::kAllToAll, 0, kKiB}, iota(16), {});
  EXPECT_EQ(plan.phases.front().local_ns, 8400 + 15 * 20000);
  // And NCCL's ring latency adds it to each network step (twice for Simple).
  const NcclGroup g = nccl_group(iota(16), 8);
  EXPECT_DOUBLE_EQ(nccl_latency_ns(c.node.nccl, CollectiveOp::kAllGather, NcclAlgorithm::kRing, NcclProtocol::kLL, g,
                                   c.inter_node.latency_ns),
                   6600 + 14 * 600 + 1 * (2700 + 20000));
}

TEST(TunedPlan, PlansPayNcclsLatencyOnceThenMoveBytes) {
  const ClusterSpec c = preset("nodes/hgx-h100.yaml");
  const ClusterTopology t(c);
  const CollectivePlan plan = plan_collective(t, c, CollectiveWork{CollectiveOp::kAllReduce, 0, 128}, iota(8), {});
  ASSERT_EQ(plan.phases.size(), 2u);
  EXPECT_EQ(plan.phases[0].local_ns, 6600 + 14 * 600);  // LL for 1 KiB
  EXPECT_TRUE(plan.phases[0].flows.empty());
  // One ring, its 14 steps as one coflow; LL moves 4x its data, and 1 KiB runs on one of NCCL's
  // 32 channels (under 32 KiB, 8 B x 8 ranks x 512 threads): 1/32 of the bandwidth.
  EXPECT_EQ(plan.phases[1].repeat, 1);
  EXPECT_EQ(plan.phases[1].flows.size(), 1u);
  EXPECT_DOUBLE_EQ(plan.phases[1].flows[0].bytes, 14 * 128 / (0.25 / 32));
  // Nothing to move, or one rank: nothing to run.
  EXPECT_TRUE(plan_collective(t, c, CollectiveWork{CollectiveOp::kAllReduce, 0, 0}, iota(8), {}).phases.empty());
  EXPECT_TRUE(plan_collective(t, c, CollectiveWork{CollectiveOp::kAllReduce, 0, 64}, {3}, {}).phases.empty());
}

}  // namespace
}  // namespace moesim
