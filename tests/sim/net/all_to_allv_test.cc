// All-to-allv from a traffic matrix (imbalanced routing): the coflow plan, the per-pair plan and
// the alpha-beta formula, with closed-form answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sim/graph/task_graph.h"
#include "sim/net/alpha_beta.h"
#include "sim/net/collective_plan.h"
#include "sim/net/flow_network.h"
#include "sim/spec/loader.h"
#include "tests/sim/net/net_test_util.h"

namespace moesim {
namespace {

using net_test::iota;
using net_test::preset;
using net_test::run;

// An all-to-allv over `n` ranks with rows[s][d] rows of row_bytes each.
CollectiveWork allv(int n, const std::vector<std::vector<std::int64_t>>& rows, std::int64_t row_bytes,
                    bool transposed = false) {
  auto m = std::make_shared<TrafficMatrix>();
  m->size = n;
  m->row_bytes = row_bytes;
  std::vector<std::int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  m->rows = std::make_shared<const std::vector<std::int64_t>>(std::move(flat));
  CollectiveWork w{CollectiveOp::kAllToAll, 0, 0};
  w.traffic = std::move(m);
  w.transposed = transposed;
  return w;
}

std::vector<std::vector<std::int64_t>> zeros(int n) {
  return std::vector<std::vector<std::int64_t>>(static_cast<std::size_t>(n), std::vector<std::int64_t>(static_cast<std::size_t>(n), 0));
}

TimeNs coflow(const ClusterTopology& t, const ClusterSpec& c, const CollectiveWork& w, bool as_coflow = true) {
  return run(t, plan_all_to_allv(t, c, iota(w.traffic->size), [&](int s, int d) { return w.pair_bytes(s, d); },
                                 as_coflow));
}

TEST(AllToAllv, PairBytesReadTheMatrixOrItsTranspose) {
  auto rows = zeros(3);
  rows[0][2] = 5;
  const CollectiveWork w = allv(3, rows, 10);
  EXPECT_EQ(w.pair_bytes(0, 2), 50);
  EXPECT_EQ(w.pair_bytes(2, 0), 0);
  const CollectiveWork back = allv(3, rows, 10, true);
  EXPECT_EQ(back.pair_bytes(2, 0), 50);
  EXPECT_EQ(CollectiveWork(CollectiveOp::kAllToAll, 0, 7).pair_bytes(1, 2), 7);
}

TEST(AllToAllv, UniformTrafficTakesTheSameTimeAsTheAllToAll) {
  // 2 DGX A100 nodes, rail-optimised: the coflow of an even matrix and the pairwise all-to-all
  // (class-aggregated) are both NIC bound.
  const ClusterSpec c = preset("clusters/dgx-a100-2node.yaml");
  const ClusterTopology t(c);
  const int n = c.num_gpus();
  for (std::int64_t rows : {1, 64, 4096}) {
    auto m = zeros(n);
    for (auto& r : m) std::fill(r.begin(), r.end(), rows);
    const CollectiveWork w = allv(n, m, 2048);
    const auto uniform = static_cast<double>(
        run(t, plan_collective(t, c, CollectiveWork{CollectiveOp::kAllToAll, 0, rows * 2048}, iota(n), {})));
    EXPECT_NEAR(static_cast<double>(coflow(t, c, w)), uniform, 1.0 + 1e-9 * uniform) << rows;
    EXPECT_NEAR(static_cast<double>(coflow(t, c, w, false)), uniform, 1.0 + 1e-9 * uniform) << rows;
  }
}

TEST(AllToAllv, CoflowTakesTheMostLoadedLinkOverItsCapacity) {
  // Two GPUs of node 0 both send b to GPU 8 (node 1): GPU 8's NIC input carries 2b. 23.5 GB/s per
  // NIC in this preset; GPU 1 reaches the other node through NIC 1, rail 1, and the spine to rail
  // 0. Latency: NCCL's Simple base (8.4 us) and two rounds of peers with traffic (d = 8: 0 -> 8;
  // d = 7: 1 -> 8), 5 us each across nodes.
  const ClusterSpec c = preset("clusters/dgx-a100-2node.yaml");
  const ClusterTopology t(c);
  const std::int64_t b = 32 * kMiB;
  auto m = zeros(16);
  m[0][8] = 1;
  m[1][8] = 1;
  const CollectiveWork w = allv(16, m, b);
  const double lat = 8400.0 + 2.0 * static_cast<double>(t.route_latency(1, 8));
  EXPECT_EQ(t.route_latency(1, 8), 5000);
  EXPECT_NEAR(static_cast<double>(coflow(t, c, w)), lat + 2.0 * b / 23.5, 2.0);
  // Max-min per pair gives the same here: both flows share the bottleneck to the end.
  EXPECT_NEAR(static_cast<double>(coflow(t, c, w, false)), lat + 2.0 * b / 23.5, 2.0);
  // The reverse exchange loads GPU 8's NIC output the same way.
  EXPECT_NEAR(static_cast<double>(coflow(t, c, allv(16, m, b, true))), lat + 2.0 * b / 23.5, 2.0);
}

TEST(AllToAllv, CoflowIsNeverSlowerThanMaxMinPerPair) {
  // Random skewed matrices: proportional rates reach the bottleneck bound; max-min per pair may
  // leave a bottleneck link waiting on a flow that started slow.
  const ClusterSpec c = preset("clusters/dgx-a100-2node.yaml");
  const ClusterTopology t(c);
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 5; ++trial) {
    auto m = zeros(16);
    for (auto& r : m)
      for (auto& v : r) v = static_cast<std::int64_t>(rng() % 64) * static_cast<std::int64_t>(rng() % 4 == 0 ? 8 : 1);
    const CollectiveWork w = allv(16, m, 64 * kKiB);
    const auto co = static_cast<double>(coflow(t, c, w));
    const auto pp = static_cast<double>(coflow(t, c, w, false));
    EXPECT_LE(co, pp + 2.0) << trial;
    EXPECT_GT(co, 0.5 * pp) << trial;  // the same links, the same bottleneck bytes
  }
}

TEST(AllToAllv, AGroupOfOneIsADeviceCopy) {
  const ClusterSpec c = preset("clusters/dgx-a100-2node.yaml");
  const ClusterTopology t(c);
  const CollectiveWork w = allv(1, {{1000}}, 1024);
  const GpuSpec& g = c.node.gpu;
  EXPECT_NEAR(static_cast<double>(coflow(t, c, w)),
              static_cast<double>(g.kernel_launch_ns) + 2.0 * 1024000 / (g.hbm_bandwidth * g.hbm_efficiency / 1e9), 1.0);
}

TEST(AllToAllv, AlphaBetaTakesTheBusiestMemberPerLinkClass) {
  const ClusterSpec c = preset("clusters/dgx-a100-2node.yaml");
  TaskGraph g(16, {0});
  const AlphaBetaNetwork ab(g, c);
  const double intra = c.node.intra_node.effective_bandwidth() / 1e9, inter = c.inter_node.effective_bandwidth() / 1e9;
  // Rounds of peers: NCCL's Simple base latency, then per round the latency of its pairs with
  // traffic (across nodes when one of them crosses).
  const double base = 8400.0;
  const double lat_intra = static_cast<double>(c.node.intra_node.latency_ns);
  const double lat_inter = static_cast<double>(c.inter_node.latency_ns);
  const std::int64_t b = 8 * kMiB;
  auto m = zeros(16);
  // GPU 0 sends 3b inside its node (to 1, 2, 3) and receives 2b from node 1 (from 8 and 9).
  m[0][1] = m[0][2] = m[0][3] = 1;
  m[8][0] = m[9][0] = 1;
  // Rounds: d = 1, 2, 3 (0 -> 1, 2, 3) within the node; d = 8 (8 -> 0) and d = 7 (9 -> 0) across.
  const double expect = base + 3 * lat_intra + 2 * lat_inter + std::max(3.0 * b / intra, 2.0 * b / inter);
  EXPECT_NEAR(static_cast<double>(ab.isolated_duration(allv(16, m, b), iota(16))), expect, 1.0);
  // Without traffic between the nodes only the intra-node term remains.
  m[8][0] = m[9][0] = 0;
  EXPECT_NEAR(static_cast<double>(ab.isolated_duration(allv(16, m, b), iota(16))),
              base + 3 * lat_intra + 3.0 * b / intra, 1.0);
  // A matrix whose size is not the group's is an input error.
  EXPECT_THROW(ab.isolated_duration(allv(8, zeros(8), b), iota(16)), InputError);
}

TEST(AllToAllv, FlowAndAlphaBetaAgreeWithoutContention) {
  // One NVSwitch node; each rank sends its own amount to every peer: per rank the NVSwitch port
  // is the only bottleneck, as alpha-beta assumes. Within 2%.
  const ClusterSpec c = preset("nodes/dgx-a100.yaml");
  const ClusterTopology t(c);
  TaskGraph g(8, {0});
  const AlphaBetaNetwork ab(g, c);
  auto m = zeros(8);
  for (int s = 0; s < 8; ++s)
    for (int d = 0; d < 8; ++d) m[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] = s == d ? 0 : 100 + 10 * s;
  const CollectiveWork w = allv(8, m, 64 * kKiB);
  const auto flow = static_cast<double>(coflow(t, c, w));
  const auto alpha = static_cast<double>(ab.isolated_duration(w, iota(8)));
  EXPECT_NEAR(flow / alpha, 1.0, 0.02) << flow << " vs " << alpha;
}

// The coflow's loads are summed per member, not route by route (collective_plan.cc): on every
// kind of topology, with a group that skips GPUs and a sparse random matrix, it must equal the
// sum of the pairs' routes exactly, link for link, and pay NCCL's rounds of peer latencies.
TEST(AllToAllv, CoflowLoadsEqualTheSumOfThePairsRoutes) {
  std::mt19937_64 rng(7);
  for (const char* file : {"clusters/dgx-a100-1024gpu-rail.yaml", "clusters/adira-8x-dgx-a100.yaml",
                           "clusters/valor-4x-v100.yaml", "nodes/pcie-8gpu-a100.yaml", "nodes/dgx-1-v100.yaml"}) {
    const ClusterSpec c = preset(file);
    const ClusterTopology t(c);
    std::vector<int> group;  // every third GPU (crossing leaves on the large cluster), at most 96
    for (int gpu = 1; gpu < t.num_gpus() && group.size() < 96; gpu += t.num_gpus() > 16 ? 3 : 1) group.push_back(gpu);
    const auto p = static_cast<int>(group.size());
    std::vector<std::vector<std::int64_t>> bytes(static_cast<std::size_t>(p), std::vector<std::int64_t>(static_cast<std::size_t>(p)));
    for (auto& row : bytes)
      for (auto& b : row) b = rng() % 3 == 0 ? 0 : static_cast<std::int64_t>(rng() % 100000);
    const auto pair = [&](int s, int d) { return bytes[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)]; };
    const CollectivePlan plan = plan_all_to_allv(t, c, group, pair, true);
    // Walking the matrix by column (a transposed all-to-allv's storage order) gives the same plan.
    const CollectivePlan by_column = plan_all_to_allv(t, c, group, pair, true, true);
    ASSERT_EQ(by_column.phases.size(), 1u);
    ASSERT_EQ(by_column.phases[0].flows.size(), 1u);
    EXPECT_EQ(by_column.phases[0].flows[0].bytes, plan.phases[0].flows[0].bytes);
    EXPECT_EQ(by_column.phases[0].local_ns, plan.phases[0].local_ns);
    ASSERT_EQ(by_column.phases[0].flows[0].links.size(), plan.phases[0].flows[0].links.size());
    for (std::size_t k = 0; k < plan.phases[0].flows[0].links.size(); ++k) {
      EXPECT_EQ(by_column.phases[0].flows[0].links[k].link, plan.phases[0].flows[0].links[k].link);
      EXPECT_EQ(by_column.phases[0].flows[0].links[k].weight, plan.phases[0].flows[0].links[k].weight);
    }
    std::map<LinkId, double> load;
    double total = 0;
    for (int s = 0; s < p; ++s)
      for (int d = 0; d < p; ++d) {
        const std::int64_t b = bytes[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)];
        if (s == d || b == 0) continue;
        std::vector<LinkId> route;
        t.route(group[static_cast<std::size_t>(s)], group[static_cast<std::size_t>(d)], route);
        for (LinkId l : route) load[l] += static_cast<double>(b);
        total += static_cast<double>(b);
      }
    double latency = 8400;  // NCCL's Simple base, then each round's slowest pair with bytes
    for (int d = 1; d < p; ++d) {
      TimeNs round = 0;
      for (int s = 0; s < p; ++s)
        if (bytes[static_cast<std::size_t>(s)][static_cast<std::size_t>((s + d) % p)] > 0)
          round = std::max(round, t.route_latency(group[static_cast<std::size_t>(s)], group[static_cast<std::size_t>((s + d) % p)]));
      latency += static_cast<double>(round);
    }
    ASSERT_EQ(plan.phases.size(), 1u) << file;
    ASSERT_EQ(plan.phases[0].flows.size(), 1u) << file;
    const FlowSpec& f = plan.phases[0].flows[0];
    EXPECT_EQ(f.bytes, total) << file;
    EXPECT_EQ(static_cast<double>(plan.phases[0].local_ns), latency) << file;
    ASSERT_EQ(f.links.size(), load.size()) << file;
    std::size_t k = 0;
    for (const auto& [link, on_link] : load) {
      EXPECT_EQ(f.links[k].link, link) << file;
      EXPECT_EQ(f.links[k].weight, on_link / total) << file << " " << t.link_name(link);
      ++k;
    }
  }
}

}  // namespace
}  // namespace moesim
