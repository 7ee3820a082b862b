// NCCL's cost model (sim/net/nccl_model.h): its formulas, its choice by size, and NCCL's tree.
#include "sim/net/nccl_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/core/error.h"
#include "sim/net/nccl_channels.h"
#include "sim/net/tuned_plan.h"
#include "tests/sim/net/net_test_util.h"

namespace moesim {
namespace {

// A tuning without latencies that allows one algorithm and protocol: its time is its traffic.
NcclTuning only(NcclAlgorithm a, NcclProtocol q) {
  NcclTuning t;
  for (auto& per_algo : t.base_latency) per_algo.fill(0);
  for (auto& hop : t.hop_latency)
    for (auto& per_algo : hop) per_algo.fill(0);
  t.protocols = {false, false, false};
  t.protocols[static_cast<std::size_t>(q)] = true;
  t.algorithms = {false, false};
  t.algorithms[static_cast<std::size_t>(a)] = true;
  return t;
}

constexpr NcclLinks kLinks{300.0, 40.0, 0};  // bytes per ns: NVLink per GPU, NIC per GPU

TEST(NcclModel, GroupShape) {
  const NcclGroup g = nccl_group({0, 1, 2, 8, 9, 16, 17, 18}, 8);
  EXPECT_EQ(g.ranks, 8);
  EXPECT_EQ(g.nodes, 3);
  EXPECT_EQ(g.per_node, 2);
}

TEST(NcclModel, RingMovesTwoTimesPMinusOneOverPOfTheBufferForAllReduce) {
  const NcclTuning t = only(NcclAlgorithm::kRing, NcclProtocol::kSimple);
  const double s = 64e6;
  for (int p : {2, 4, 8}) {
    const NcclGroup g{p, 1, p};
    EXPECT_DOUBLE_EQ(choose_nccl(t, CollectiveOp::kAllReduce, s, g, kLinks).time_ns, 2.0 * (p - 1) / p * s / 300.0);
    EXPECT_DOUBLE_EQ(choose_nccl(t, CollectiveOp::kAllGather, s, g, kLinks).time_ns, (p - 1.0) / p * s / 300.0);
    EXPECT_DOUBLE_EQ(choose_nccl(t, CollectiveOp::kReduceScatter, s, g, kLinks).time_ns, (p - 1.0) / p * s / 300.0);
  }
  // Across nodes the rings leave through min(channels, m) NICs, 8 x 40 = 320, while NVLink
  // carries 7/8 of the traffic (each member leaves its node in one of the 8 rings): 300 x 8/7 is
  // faster, so the NICs bound; with 4 channels, 4 x 40 = 160 does.
  const NcclGroup two{16, 2, 8};
  EXPECT_DOUBLE_EQ(choose_nccl(t, CollectiveOp::kAllReduce, s, two, kLinks).time_ns, 30.0 / 16 * s / 320.0);
  NcclTuning four = t;
  four.channels = 4;
  const NcclRun r = choose_nccl(four, CollectiveOp::kAllReduce, s, two, kLinks);
  EXPECT_EQ(r.channels, 4);
  EXPECT_DOUBLE_EQ(r.time_ns, 30.0 / 16 * s / 160.0);
}

TEST(NcclModel, TreeMovesTheChainAndTheInterNodeTree) {
  NcclTuning t = only(NcclAlgorithm::kTree, NcclProtocol::kSimple);
  const double s = 64e6, eff = 0.92;
  // One node: the chain carries 2S through every inner GPU (S for a chain of two).
  EXPECT_DOUBLE_EQ(choose_nccl(t, CollectiveOp::kAllReduce, s, {8, 1, 8}, kLinks).time_ns, 2 * s / 300.0 / eff);
  EXPECT_DOUBLE_EQ(choose_nccl(t, CollectiveOp::kAllReduce, s, {2, 1, 2}, kLinks).time_ns, s / 300.0 / eff);
  // Two nodes of one GPU: S over one NIC each way; four: 2S (an inner node feeds its parent and
  // two children).
  EXPECT_DOUBLE_EQ(choose_nccl(t, CollectiveOp::kAllReduce, s, {2, 2, 1}, kLinks).time_ns, s / 40.0 / eff);
  EXPECT_DOUBLE_EQ(choose_nccl(t, CollectiveOp::kAllReduce, s, {4, 4, 1}, kLinks).time_ns, 2 * s / 40.0 / eff);
  // Two nodes of 8, 8 chains rotated over each node's GPUs: every GPU is once head, once tail and
  // 6 times inner, (1 + 1 + 12) / 8 = 1.75 S; against S over 8 NICs = S / 320.
  EXPECT_DOUBLE_EQ(choose_nccl(t, CollectiveOp::kAllReduce, s, {16, 2, 8}, kLinks).time_ns, 1.75 * s / 300.0 / eff);
  // With 2 channels some GPU is inner in both chains: 2S (fast NICs, so that the chain bounds).
  NcclTuning two_channels = t;
  two_channels.channels = 2;
  EXPECT_DOUBLE_EQ(choose_nccl(two_channels, CollectiveOp::kAllReduce, s, {16, 2, 8}, NcclLinks{300.0, 1000.0, 0})
                       .time_ns,
                   2 * s / 300.0 / eff);
  // All-gather and reduce-scatter have rings only.
  EXPECT_THROW(choose_nccl(t, CollectiveOp::kAllGather, s, {8, 1, 8}, kLinks), InputError);
}

TEST(NcclModel, ProtocolEfficienciesAreNcclsFactors) {
  const double s = 1e8;
  const NcclGroup g{8, 1, 8};
  const auto ring = [&](NcclProtocol q) {
    return choose_nccl(only(NcclAlgorithm::kRing, q), CollectiveOp::kAllReduce, s, g, kLinks).time_ns;
  };
  EXPECT_DOUBLE_EQ(ring(NcclProtocol::kLL) / ring(NcclProtocol::kSimple), 4.0);            // 1/4
  EXPECT_DOUBLE_EQ(ring(NcclProtocol::kLL128) / ring(NcclProtocol::kSimple), 1 / 0.92);    // 120/128, as 0.92
  const auto tree = [&](NcclProtocol q) {
    return choose_nccl(only(NcclAlgorithm::kTree, q), CollectiveOp::kAllReduce, s, g, kLinks).time_ns;
  };
  EXPECT_DOUBLE_EQ(tree(NcclProtocol::kLL) / tree(NcclProtocol::kSimple), 3.8);
  EXPECT_DOUBLE_EQ(tree(NcclProtocol::kLL128) / tree(NcclProtocol::kSimple), 128.0 / 120);
}

TEST(NcclModel, LatencyIsBasePlusHopsAsNcclCountsThem) {
  const NcclTuning t;  // NCCL 2.19's figures
  // Ring, one node of 8: 2(p-1) = 14 NVLink hops (all-reduce), 7 (all-gather).
  EXPECT_DOUBLE_EQ(nccl_latency_ns(t, CollectiveOp::kAllReduce, NcclAlgorithm::kRing, NcclProtocol::kLL, {8, 1, 8}, 0),
                   6600 + 14 * 600);
  EXPECT_DOUBLE_EQ(nccl_latency_ns(t, CollectiveOp::kAllGather, NcclAlgorithm::kRing, NcclProtocol::kSimple, {8, 1, 8}, 0),
                   8400 + 7 * 3400);
  // Two nodes: 2N = 4 of the 30 all-reduce steps cross the network, whose own latency (here 5 us)
  // NCCL adds to each, twice for Simple.
  EXPECT_DOUBLE_EQ(nccl_latency_ns(t, CollectiveOp::kAllReduce, NcclAlgorithm::kRing, NcclProtocol::kLL128, {16, 2, 8}, 5000),
                   14000 + 26 * 1900 + 4 * (4000 + 5000));
  EXPECT_DOUBLE_EQ(nccl_latency_ns(t, CollectiveOp::kAllReduce, NcclAlgorithm::kRing, NcclProtocol::kSimple, {16, 2, 8}, 5000),
                   8400 + 26 * 3400 + 4 * (14000 + 10000));
  // Tree over 64 nodes of 8: up and down the chain (7 hops) and log2(64) = 6 network hops.
  EXPECT_DOUBLE_EQ(nccl_latency_ns(t, CollectiveOp::kAllReduce, NcclAlgorithm::kTree, NcclProtocol::kLL, {512, 64, 8}, 5000),
                   6800 + 2 * (7 * 600 + 6 * (5000 + 5000)));
  // A PCIe node uses NCCL's PCI row.
  NcclTuning pcie;
  pcie.intra_hop = NcclHop::kPcie;
  EXPECT_DOUBLE_EQ(nccl_latency_ns(pcie, CollectiveOp::kAllReduce, NcclAlgorithm::kRing, NcclProtocol::kLL, {8, 1, 8}, 0),
                   6600 + 14 * 1000);
}

TEST(NcclModel, ChoosesLLThenLL128ThenSimpleAsTheSizeGrows) {
  const ClusterSpec c = net_test::preset("nodes/hgx-h100.yaml");
  const NcclGroup g{8, 1, 8};
  const NcclLinks links = nccl_links(c, g);
  const auto proto = [&](double s) { return choose_nccl(c.node.nccl, CollectiveOp::kAllReduce, s, g, links).protocol; };
  EXPECT_EQ(proto(1024), NcclProtocol::kLL);
  EXPECT_EQ(proto(64 * 1024), NcclProtocol::kLL);
  EXPECT_EQ(proto(16 * 1024 * 1024), NcclProtocol::kLL128);
  EXPECT_EQ(proto(4.0 * 1024 * 1024 * 1024), NcclProtocol::kSimple);
  // Once a protocol is left behind it does not come back.
  int last = 0;
  for (double s = 8; s < 1e10; s *= 2) {
    const int q = static_cast<int>(proto(s));
    EXPECT_GE(q, last) << s;
    last = q;
  }
  // The estimate is the fastest enabled pair's: never above the ring with Simple.
  for (double s : {1e3, 1e6, 1e9}) {
    const NcclRun best = choose_nccl(c.node.nccl, CollectiveOp::kAllReduce, s, g, links);
    const double simple = nccl_latency_ns(c.node.nccl, CollectiveOp::kAllReduce, NcclAlgorithm::kRing,
                                          NcclProtocol::kSimple, g, 0) + 14.0 / 8 * s / links.intra;
    EXPECT_LE(best.time_ns, simple + 1e-6) << s;
  }
}

TEST(NcclModel, SmallAllReducesAcrossManyNodesTakeTheTree) {
  // Across 8 nodes a ring pays 2N network hops and 2(p-1) steps, the tree 2 log2 N: NCCL picks it
  // for small messages, and the ring for large ones (the tree's Simple is 0.92 of the ring's, and
  // its latency is no longer much smaller).
  ClusterSpec c = net_test::preset("clusters/dgx-a100-1024gpu-rail.yaml");
  const NcclGroup g{64, 8, 8};
  const NcclLinks links = nccl_links(c, g);
  EXPECT_EQ(choose_nccl(c.node.nccl, CollectiveOp::kAllReduce, 64e3, g, links).algorithm, NcclAlgorithm::kTree);
  EXPECT_EQ(choose_nccl(c.node.nccl, CollectiveOp::kAllReduce, 4e9, g, links).algorithm, NcclAlgorithm::kRing);
  // Disabled algorithms are never chosen.
  c.node.nccl.algorithms = {true, false};
  EXPECT_EQ(choose_nccl(c.node.nccl, CollectiveOp::kAllReduce, 64e3, g, links).algorithm, NcclAlgorithm::kRing);
}

TEST(NcclModel, ChannelsFollowNcclsBytesPerThread) {
  const NcclTuning t;  // 32 channels
  const NcclGroup eight{8, 1, 8};
  const auto used = [&](NcclAlgorithm a, NcclProtocol q, double s, const NcclGroup& g, const NcclLinks& l) {
    return nccl_channels_used(t, a, q, s, g, l);
  };
  const auto ring = NcclAlgorithm::kRing;
  // Ring LL: 8 bytes per thread x 8 ranks, 512 threads: 32 KiB per channel.
  EXPECT_EQ(used(ring, NcclProtocol::kLL, 1024, eight, kLinks), 1);
  EXPECT_EQ(used(ring, NcclProtocol::kLL, 256 * 1024, eight, kLinks), 8);
  EXPECT_EQ(used(ring, NcclProtocol::kLL, 256 * 1024 - 1, eight, kLinks), 7);
  EXPECT_EQ(used(ring, NcclProtocol::kLL, 1024 * 1024, eight, kLinks), 32);
  EXPECT_EQ(used(ring, NcclProtocol::kLL, 64.0 * 1024 * 1024, eight, kLinks), 32);
  // 16 ranks: 64 KiB per channel.
  EXPECT_EQ(used(ring, NcclProtocol::kLL, 1024 * 1024, {16, 2, 8}, kLinks), 16);
  // LL128: 8 bytes x 640 threads = 5,120 B per channel, whatever the ranks.
  EXPECT_EQ(used(ring, NcclProtocol::kLL128, 64 * 1024, eight, kLinks), 12);
  EXPECT_EQ(used(ring, NcclProtocol::kLL128, 256 * 1024, eight, kLinks), 32);
  // Simple: 64 bytes x 512 threads = 32 KiB; on a ring of at most 12 GB/s, 256 threads: 16 KiB.
  EXPECT_EQ(used(ring, NcclProtocol::kSimple, 256 * 1024, eight, kLinks), 8);
  EXPECT_EQ(used(ring, NcclProtocol::kSimple, 256 * 1024, eight, NcclLinks{12.0, 0, 0}), 16);
  // The tree's LL threshold is not scaled by the ranks: 8 x 512 = 4 KiB per channel.
  EXPECT_EQ(used(NcclAlgorithm::kTree, NcclProtocol::kLL, 64 * 1024, eight, kLinks), 16);
}

TEST(NcclModel, SmallSizesRunOnTheChannelsTheyFill) {
  // HGX H100, 8 ranks: NVLink 450 GB/s x 0.82 = 369 B/ns; ring LL's latency 6.6 + 14 x 0.6 us.
  const ClusterSpec c = net_test::preset("nodes/hgx-h100.yaml");
  const NcclGroup g{8, 1, 8};
  const NcclLinks links = nccl_links(c, g);
  ASSERT_DOUBLE_EQ(links.intra, 369.0);
  const auto run = [&](double s) { return choose_nccl(c.node.nccl, CollectiveOp::kAllReduce, s, g, links); };
  // 256 KiB: LL on 8 of the 32 channels: 7/4 x 262,144 B at 369 x 1/4 x 8/32 B/ns.
  const NcclRun quarter = run(256 * 1024);
  EXPECT_EQ(quarter.protocol, NcclProtocol::kLL);
  EXPECT_DOUBLE_EQ(quarter.efficiency, 0.25 * 8 / 32);
  EXPECT_NEAR(quarter.time_ns, 15000 + 458752 / (369 * 0.25 * 8 / 32), 1e-6);
  // 1 MiB fills all 32: four times the bytes in the same time.
  const NcclRun mib = run(1024 * 1024);
  EXPECT_DOUBLE_EQ(mib.efficiency, 0.25);
  EXPECT_NEAR(mib.time_ns, 15000 + 1835008 / (369 * 0.25), 1e-6);
  EXPECT_NEAR(mib.time_ns, quarter.time_ns, 1e-6);
  // 64 MiB: Simple (8.4 + 14 x 3.4 us of latency) on every channel, as before channels were
  // counted.
  const NcclRun large = run(64.0 * 1024 * 1024);
  EXPECT_EQ(large.protocol, NcclProtocol::kSimple);
  EXPECT_DOUBLE_EQ(large.efficiency, 1.0);
  EXPECT_NEAR(large.time_ns, 56000 + 7.0 / 4 * 64 * 1024 * 1024 / 369, 1e-6);
  // nccl-tests' sizes, doubling: the time never falls as the size grows. (Between them it can:
  // a size just under two channels' worth runs on one channel, as in NCCL.)
  double last = 0;
  for (double s = 8; s < 1e10; s *= 2) {
    const double time = run(s).time_ns;
    EXPECT_GE(time, last) << s;
    last = time;
  }
}

TEST(NcclModel, NothingToMoveCostsNothing) {
  const NcclTuning t;
  EXPECT_EQ(choose_nccl(t, CollectiveOp::kAllReduce, 0, {8, 1, 8}, kLinks).time_ns, 0.0);
  EXPECT_EQ(choose_nccl(t, CollectiveOp::kAllReduce, 1e6, {1, 1, 1}, kLinks).time_ns, 0.0);
}

TEST(NcclModel, AllToAllPaysOneLatencyPerRoundOfPeers) {
  const NcclTuning t;
  // Four members on two nodes (0, 1 | 2, 3): round 1 (0->1, 1->2, 2->3, 3->0) and round 3 cross
  // nodes, round 2 (0->2, 1->3, ...) too: 3 rounds at 5 us after the Simple base 8.4 us.
  const auto lat = [](int s, int d) { return s / 2 == d / 2 ? TimeNs{3000} : TimeNs{5000}; };
  EXPECT_DOUBLE_EQ(all_to_all_latency_ns(t, 4, lat, 5000), 8400 + 3 * 5000);
  // One node: every round within it.
  EXPECT_DOUBLE_EQ(all_to_all_latency_ns(t, 8, [](int, int) { return TimeNs{3000}; }, 3000), 8400 + 7 * 3000);
  // Pairs that move nothing add nothing: only round 1 has traffic here.
  const auto only_next = [](int s, int d) { return d == (s + 1) % 8 ? TimeNs{3000} : TimeNs{0}; };
  EXPECT_DOUBLE_EQ(all_to_all_latency_ns(t, 8, only_next, 3000), 8400 + 3000);
}

TEST(NcclModel, NcclsDoubleBinaryTreeKeepsEveryNodeAtTwoSByteSends) {
  // The first tree: position 0 is the root; the leaves are the odd positions.
  EXPECT_EQ(nccl_tree_parent(0, 8), -1);
  const std::vector<int> parents{-1, 2, 4, 2, 0, 6, 4, 6};
  for (int r = 0; r < 8; ++r) EXPECT_EQ(nccl_tree_parent(r, 8), parents[static_cast<std::size_t>(r)]) << r;
  EXPECT_EQ(nccl_tree_parent(4, 5), 0);
  EXPECT_EQ(nccl_tree_parent(3, 5), 2);
  // Every position reaches the root, for any count.
  for (int n = 1; n < 70; ++n)
    for (int r = 0; r < n; ++r) {
      int x = r, hops = 0;
      while (x != 0 && hops < 64) {
        x = nccl_tree_parent(x, n);
        ASSERT_GE(x, 0);
        ASSERT_LT(x, n);
        ++hops;
      }
      EXPECT_EQ(x, 0) << n << " " << r;
    }
}

}  // namespace
}  // namespace moesim

namespace moesim {
namespace {

// nccl_choice is choose_nccl with the cluster's tuning, links and group shape: what both network
// models run and `moesim collective` prints.
using net_test::iota;
using net_test::preset;

TEST(NcclModel, TheChoiceOfAClusterIsTheTunedChoiceOfItsGroup) {
  for (const char* file : {"nodes/hgx-h100.yaml", "clusters/dgx-a100-2node.yaml"}) {
    const ClusterSpec cluster = preset(file);
    const std::vector<int> group = iota(cluster.num_gpus());
    const NcclGroup shape = nccl_group(group, cluster.node.gpus_per_node);
    for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
      for (std::int64_t b : {16LL, 65536LL, 1LL << 26}) {
        const NcclRun want = choose_nccl(cluster.node.nccl, op, static_cast<double>(b * cluster.num_gpus()), shape,
                                         nccl_links(cluster, shape));
        const NcclRun got = nccl_choice(cluster, op, b, group);
        EXPECT_EQ(got.algorithm, want.algorithm) << file << " " << b;
        EXPECT_EQ(got.protocol, want.protocol) << file << " " << b;
        EXPECT_EQ(got.time_ns, want.time_ns) << file << " " << b;
      }
    }
  }
  // Small all-reduces in one node run LL, large ones Simple.
  const ClusterSpec h100 = preset("nodes/hgx-h100.yaml");
  EXPECT_EQ(nccl_choice(h100, CollectiveOp::kAllReduce, 16, iota(8)).protocol, NcclProtocol::kLL);
  EXPECT_EQ(nccl_choice(h100, CollectiveOp::kAllReduce, 1LL << 27, iota(8)).protocol, NcclProtocol::kSimple);
}

}  // namespace
}  // namespace moesim
