// The flow-level network model: max-min fairness, collectives as flows, and closed-form answers.
#include "sim/net/flow_network.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sim/net/alpha_beta.h"
#include "sim/net/nccl_model.h"
#include "sim/spec/loader.h"
#include "tests/sim/net/net_test_util.h"

namespace moesim {
namespace {

using net_test::iota;
using net_test::preset;
using net_test::run;

TimeNs collective(const ClusterSpec& c, CollectiveOp op, std::int64_t b, const std::vector<int>& group,
                  PlanOptions options = {}) {
  const ClusterTopology t(c);
  return run(t, plan_collective(t, c, CollectiveWork{op, 0, b}, group, options));
}

std::vector<double> solve(std::vector<double> caps, const std::vector<std::vector<WeightedLink>>& flows) {
  MaxMinSolver s(std::move(caps));
  std::vector<std::span<const WeightedLink>> spans(flows.begin(), flows.end());
  return s.solve(spans);
}

TEST(MaxMin, OneFlowGetsItsBottleneck) {
  EXPECT_EQ(solve({10, 4, 7}, {{{0, 1}, {1, 1}, {2, 1}}}), std::vector<double>{4});
}

TEST(MaxMin, KFlowsOnOneLinkShareItEqually) {
  EXPECT_EQ(solve({9}, {{{0, 1}}, {{0, 1}}, {{0, 1}}}), (std::vector<double>{3, 3, 3}));
}

TEST(MaxMin, UnusedCapacityGoesToTheUnconstrainedFlow) {
  // Link 0 (10) carries f0 and f1, link 1 (4) carries f1 and f2: f1 = f2 = 2, f0 takes the rest, 8.
  EXPECT_EQ(solve({10, 4}, {{{0, 1}}, {{0, 1}, {1, 1}}, {{1, 1}}}), (std::vector<double>{8, 2, 2}));
}

TEST(MaxMin, AWeightedFlowActsAsItsCopies) {
  // One flow of weight 3 and one plain flow on a link of 8: 2 each, as four plain flows would get.
  EXPECT_EQ(solve({8}, {{{0, 3}}, {{0, 1}}}), (std::vector<double>{2, 2}));
}

// The time a plan's flows take, without its fixed first step (NCCL's latency).
double moving_ns(const ClusterTopology& t, const CollectivePlan& plan) {
  return static_cast<double>(run(t, plan) - plan.phases.front().local_ns);
}

TEST(FlowCollectives, AllToAllInsideAnNvSwitchNode) {
  // S bytes per rank, N = 8: latency + S(N-1)/N / B, B = 12 x 25 GB/s x 0.77 = 231 B/ns; latency =
  // NCCL's Simple base 8.4 us + 7 rounds of peers at the NVLink's 3 us.
  const ClusterSpec c = preset("nodes/dgx-a100.yaml");
  const std::int64_t b = 8 * kMiB;  // per peer; S = 8b
  const double expected = 8400 + 7 * 3000 + 8.0 * b * 7 / 8 / 231.0;
  EXPECT_NEAR(static_cast<double>(collective(c, CollectiveOp::kAllToAll, b, iota(8))), expected, 1.0);
}

TEST(FlowCollectives, RingAllReduceInsideANode) {
  // S = 32 MiB over 8 GPUs: NCCL's estimates (base + steps x NVLink hop + steps x S/n / (B x eff))
  // put Simple ahead of LL128 (40.6 us + 276 us) and LL: 8.4 us + 14 x 3.4 us + 14 x (S/n) / B.
  const ClusterSpec c = preset("nodes/dgx-a100.yaml");
  const std::int64_t b = 4 * kMiB;  // S / n
  EXPECT_NEAR(static_cast<double>(collective(c, CollectiveOp::kAllReduce, b, iota(8))),
              8400 + 14 * 3400 + 14 * (b / 231.0), 14.0);
  // All-gather and reduce-scatter: n-1 steps, Simple too (32.2 us + 127 us against 27.3 + 138).
  EXPECT_NEAR(static_cast<double>(collective(c, CollectiveOp::kAllGather, b, iota(8))),
              8400 + 7 * 3400 + 7 * (b / 231.0), 7.0);
}

TEST(FlowCollectives, AlphaBetaAndFlowAgreeWithoutContention) {
  // Every algorithm and protocol NCCL picks over these sizes (LL, LL128, Simple; rings within a
  // node and across nodes, trees), on NVSwitch nodes and rail-optimised clusters: within 2%.
  for (const char* file : {"nodes/dgx-a100.yaml", "nodes/hgx-h100.yaml", "clusters/dgx-a100-2node.yaml",
                           "clusters/h100-4x-hgx-ndr.yaml", "clusters/adira-8x-dgx-a100.yaml"}) {
    const ClusterSpec c = preset(file);
    const TaskGraph g(c.num_gpus(), {0});
    const AlphaBetaNetwork ab(g, c);
    const int n = c.num_gpus();
    const NcclGroup shape = nccl_group(iota(n), c.node.gpus_per_node);
    std::set<std::pair<int, int>> chosen;  // (algorithm, protocol)
    for (CollectiveOp op : {CollectiveOp::kAllToAll, CollectiveOp::kAllReduce, CollectiveOp::kAllGather,
                            CollectiveOp::kReduceScatter}) {
      for (std::int64_t b = 64; b <= 256 * kMiB; b *= 16) {
        std::string how = "pairwise";
        if (op != CollectiveOp::kAllToAll) {
          const NcclRun r = choose_nccl(c.node.nccl, op, static_cast<double>(b) * n, shape, nccl_links(c, shape));
          chosen.insert({static_cast<int>(r.algorithm), static_cast<int>(r.protocol)});
          how = std::string(to_string(r.algorithm)) + "/" + to_string(r.protocol);
        }
        const auto flow = static_cast<double>(collective(c, op, b, iota(n)));
        const auto alpha = static_cast<double>(ab.isolated_duration(CollectiveWork{op, 0, b}, iota(n)));
        EXPECT_NEAR(flow / alpha, 1.0, 0.02) << file << " " << to_string(op) << " " << b << " B per rank, " << how;
      }
    }
    EXPECT_GE(chosen.size(), 3u) << file;
  }
}

TEST(FlowCollectives, MultiNodeAllToAllBusBandwidthFollowsTheNicRule) {
  // N nodes, one 23.5 GB/s NIC per GPU: a rank's S bytes leave the node at (N-1)/N * S, so
  // algbw = S / t -> N/(N-1) x 23.5 GB/s, and busbw = algbw x (n-1)/n with n = 8N ranks.
  for (const char* file : {"clusters/dgx-a100-2node.yaml", "clusters/adira-8x-dgx-a100.yaml"}) {
    const ClusterSpec c = preset(file);
    const int n = c.num_gpus(), nodes = c.num_nodes;
    const std::int64_t b = 1 * kGiB / n;
    const double t = static_cast<double>(collective(c, CollectiveOp::kAllToAll, b, iota(n)));
    const double algbw = static_cast<double>(b) * n / t;  // bytes per ns = GB/s
    EXPECT_NEAR(algbw / (23.5 * nodes / (nodes - 1)), 1.0, 0.01) << file;
    const double busbw = algbw * (n - 1) / n;
    EXPECT_NEAR(busbw, 23.5 * nodes / (nodes - 1) * (n - 1) / n, 0.01 * busbw) << file;
  }
}

// Every GPU of the first half of the nodes sends b to the same local rank half a cluster away:
// all of it crosses from the first leaf group to the second.
CollectivePlan cross_leaf_plan(const ClusterTopology& t, const ClusterSpec& c, std::int64_t b) {
  const int n = t.num_gpus();
  std::vector<std::vector<std::int64_t>> m(static_cast<std::size_t>(n), std::vector<std::int64_t>(static_cast<std::size_t>(n), 0));
  for (int a = 0; a < n / 2; ++a) m[static_cast<std::size_t>(a)][static_cast<std::size_t>(a + n / 2)] = b;
  return plan_all_to_allv(t, c, iota(n), m);
}

TEST(FlowCollectives, OversubscriptionSlowsCrossLeafTrafficByTheRatio) {
  ClusterSpec c = preset("clusters/adira-8x-dgx-a100.yaml");
  c.num_nodes = 4;
  c.fabric.kind = FabricKind::kFatTree;
  c.fabric.nodes_per_leaf = 2;
  const std::int64_t b = 64 * kMiB;
  c.fabric.oversubscription = 1;
  const double full = moving_ns(ClusterTopology(c), cross_leaf_plan(ClusterTopology(c), c, b));
  c.fabric.oversubscription = 2;
  const double half = moving_ns(ClusterTopology(c), cross_leaf_plan(ClusterTopology(c), c, b));
  EXPECT_NEAR(full, b / 23.5, 1.0);  // NIC bound
  EXPECT_NEAR(half / full, 2.0, 1e-6);
}

ClusterSpec dgx1_cluster(int nodes) {
  ClusterSpec c = preset("nodes/dgx-1-v100.yaml");
  c.num_nodes = nodes;
  c.inter_node = LinkSpec{100e9 / 8 * 4 / 8, 0.9, 5000};
  c.fabric.present = true;
  c.fabric.kind = FabricKind::kFatTree;
  c.fabric.nodes_per_leaf = nodes;
  return c;
}

TEST(FlowCollectives, Dgx1IsLimitedBySingleLinksAndSharedNics) {
  const ClusterSpec c = dgx1_cluster(2);
  const ClusterTopology t(c);
  const std::int64_t b = 40 * kMiB;
  const auto matrix = [](std::vector<std::tuple<int, int, std::int64_t>> sends) {
    std::vector<std::vector<std::int64_t>> m(16, std::vector<std::int64_t>(16, 0));
    for (auto [s, d, bytes] : sends) m[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] = bytes;
    return m;
  };
  // gpu0 -> gpu1 is one NVLink2 lane (20 GB/s effective), gpu0 -> gpu3 two lanes (40 GB/s): the
  // single-lane pair sets the time.
  EXPECT_NEAR(moving_ns(t, plan_all_to_allv(t, c, iota(16), matrix({{0, 1, b}, {0, 3, b}}))), b / 20.0, 1.0);
  // GPUs 0 and 1 share NIC 0 (100 Gb/s x 0.9 = 11.25 GB/s): alone gpu0 gets all of it, together half.
  EXPECT_NEAR(moving_ns(t, plan_all_to_allv(t, c, iota(16), matrix({{0, 8, b}}))), b / 11.25, 1.0);
  EXPECT_NEAR(moving_ns(t, plan_all_to_allv(t, c, iota(16), matrix({{0, 8, b}, {1, 9, b}}))), b / 5.625, 1.0);
  // A whole-node all-to-all: the 12 pairs without an NVLink cross QPI (19.2 GB/s x 0.75 = 14.4,
  // 1.2 GB/s each), which bounds the exchange far below the NVLink pairs.
  const ClusterSpec node = preset("nodes/dgx-1-v100.yaml");
  const ClusterTopology nt(node);
  EXPECT_NEAR(moving_ns(nt, plan_collective(nt, node, CollectiveWork{CollectiveOp::kAllToAll, 0, b}, iota(8), {})),
              b / 1.2, 2.0);
}

TEST(FlowCollectives, AggregatedAndPerPairPlansGiveTheSameTimes) {
  // DGX-1 nodes (uneven NVLinks, shared NICs) on an oversubscribed two-level fat tree.
  ClusterSpec c = dgx1_cluster(4);
  c.fabric.nodes_per_leaf = 2;
  c.fabric.oversubscription = 3;
  const ClusterTopology t(c);
  ASSERT_TRUE(is_symmetric_group(t, iota(32)));
  for (AllToAllAlgorithm algo : {AllToAllAlgorithm::kPairwise, AllToAllAlgorithm::kHierarchical}) {
    for (std::int64_t b : {4 * kKiB, 8 * kMiB}) {
      const CollectiveWork w{CollectiveOp::kAllToAll, 0, b};
      const CollectivePlan agg = plan_collective(t, c, w, iota(32), PlanOptions{algo, true});
      const CollectivePlan flat = plan_collective(t, c, w, iota(32), PlanOptions{algo, false});
      EXPECT_LT(agg.phases[0].flows.size(), flat.phases[0].flows.size());
      const auto ta = static_cast<double>(run(t, agg)), tf = static_cast<double>(run(t, flat));
      EXPECT_NEAR(ta, tf, 2.0 + 1e-9 * tf) << to_string(algo) << " " << b;
    }
  }
  // Rail-optimised: the same on the 2-node DGX A100.
  const ClusterSpec rail = preset("clusters/adira-8x-dgx-a100.yaml");
  const ClusterTopology rt(rail);
  const CollectiveWork w{CollectiveOp::kAllToAll, 0, kMiB};
  EXPECT_NEAR(static_cast<double>(run(rt, plan_collective(rt, rail, w, iota(64), PlanOptions{{}, true}))),
              static_cast<double>(run(rt, plan_collective(rt, rail, w, iota(64), PlanOptions{{}, false}))), 2.0);
}

// The expert-parallel groups of tensor x expert layouts hold the same local ranks on every node
// (stride tp): they aggregate too, with the same times as one flow per pair.
TEST(FlowCollectives, StridedGroupsAggregateExactly) {
  const auto strided = [](int first, int stride, int count) {
    std::vector<int> g;
    for (int k = 0; k < count; ++k) g.push_back(first + k * stride);
    return g;
  };
  ClusterSpec fat = dgx1_cluster(4);  // DGX-1: uneven NVLinks, a NIC per two GPUs
  fat.fabric.nodes_per_leaf = 2;
  fat.fabric.oversubscription = 3;
  const ClusterSpec rail = preset("clusters/adira-8x-dgx-a100.yaml");
  for (const ClusterSpec* c : {static_cast<const ClusterSpec*>(&fat), &rail}) {
    const ClusterTopology t(*c);
    const int nodes = t.num_nodes();
    for (const auto& group : {strided(0, 2, 4 * nodes), strided(1, 8, nodes), strided(3, 4, 2 * nodes)}) {
      ASSERT_TRUE(is_symmetric_group(t, group)) << c->name << " from " << group.front();
      for (std::int64_t b : {4 * kKiB, 8 * kMiB}) {
        const CollectiveWork w{CollectiveOp::kAllToAll, 0, b};
        const CollectivePlan agg = plan_collective(t, *c, w, group, PlanOptions{{}, true});
        const CollectivePlan flat = plan_collective(t, *c, w, group, PlanOptions{{}, false});
        EXPECT_LT(agg.phases[0].flows.size(), flat.phases[0].flows.size());
        const auto ta = static_cast<double>(run(t, agg)), tf = static_cast<double>(run(t, flat));
        EXPECT_NEAR(ta, tf, 2.0 + 1e-9 * tf) << c->name << " group from " << group.front() << " stride "
                                             << group[1] - group[0] << ", " << b << " B";
      }
    }
  }
  // Not the same local ranks everywhere, or uneven leaf groups: one flow per pair.
  const ClusterTopology t(fat);
  EXPECT_FALSE(is_symmetric_group(t, {0, 2, 9, 11}));
  EXPECT_FALSE(is_symmetric_group(t, {0, 2, 8}));
  EXPECT_FALSE(is_symmetric_group(t, strided(0, 8, 3)));  // two nodes of one leaf, one of another
}

TEST(FlowCollectives, HierarchicalAllToAllPaysTwoPhasesAndStrideCopies) {
  const ClusterSpec c = preset("clusters/adira-8x-dgx-a100.yaml");
  const TimeNs pair_small = collective(c, CollectiveOp::kAllToAll, 1 * kKiB, iota(64));
  const TimeNs hier_small = collective(c, CollectiveOp::kAllToAll, 1 * kKiB, iota(64), {AllToAllAlgorithm::kHierarchical});
  const TimeNs pair_big = collective(c, CollectiveOp::kAllToAll, 16 * kMiB, iota(64));
  const TimeNs hier_big = collective(c, CollectiveOp::kAllToAll, 16 * kMiB, iota(64), {AllToAllAlgorithm::kHierarchical});
  // Pairwise pays 63 rounds of peers (8.4 us + 63 x 5 us); 2DH pays 7 within a node and 7 across
  // (2 x 8.4 us + 7 x 3 us + 7 x 5 us) plus two stride copies: it wins for small messages, which is
  // why it exists, and loses for large ones, whose stride copies grow with the size.
  EXPECT_NEAR(static_cast<double>(pair_small), 8400 + 63 * 5000, 0.01 * static_cast<double>(pair_small));
  EXPECT_LT(hier_small, pair_small / 2);
  EXPECT_GT(static_cast<double>(hier_big) / static_cast<double>(pair_big), 1.0);
  // Partial nodes cannot use 2DH.
  EXPECT_THROW(collective(c, CollectiveOp::kAllToAll, kKiB, iota(12), {AllToAllAlgorithm::kHierarchical}), InputError);
}

}  // namespace
}  // namespace moesim
