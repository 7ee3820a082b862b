// DeepEP's token traffic (sim/step/dedup_dispatch.h, --dispatcher deepep): the hit probabilities
// against counting and sampling, and the step's exchange of both hops. The step cases run
// Qwen3-30B-A3B (hidden 2,048, 128 experts, top 8, dropless) on 32 H100s of 8 per node: pp 2, ep 16
// over the stage's two nodes, 512-token sequences, so each rank routes 512 tokens and sends C = 32
// rows to each expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sim/step/dedup_dispatch.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/spec/spec_test_util.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

double choose(int n, int k) {
  if (k < 0 || k > n) return 0;
  double c = 1;
  for (int i = 0; i < k; ++i) c = c * (n - i) / (i + 1);
  return c;
}

TEST(DedupDispatch, MissProbabilityIsTheHypergeometricZeroTerm) {
  EXPECT_NEAR(miss_probability(8, 2, 3), choose(6, 3) / choose(8, 3), 1e-15);
  EXPECT_NEAR(miss_probability(256, 32, 8), choose(224, 8) / choose(256, 8), 1e-12);
  EXPECT_DOUBLE_EQ(miss_probability(10, 0, 4), 1.0);
  EXPECT_DOUBLE_EQ(miss_probability(10, 8, 3), 0.0);  // three draws cannot all miss eight of ten
  // A fractional count interpolates between its neighbours.
  EXPECT_NEAR(miss_probability(32, 4, 2.5), 0.5 * (miss_probability(32, 4, 2) + miss_probability(32, 4, 3)), 1e-15);
}

// One token's experts: k distinct among E uniformly, or (groups) m of the g groups, then k / m
// distinct experts within each chosen group (the spread dedup_hits assumes).
std::vector<int> route(std::mt19937_64& rng, int experts, int top_k, std::optional<ModelSpec::RouterGroups> groups) {
  std::vector<int> out;
  auto pick = [&](std::vector<int> pool, int n) {
    std::shuffle(pool.begin(), pool.end(), rng);
    pool.resize(static_cast<std::size_t>(n));
    return pool;
  };
  if (!groups) {
    std::vector<int> all(static_cast<std::size_t>(experts));
    std::iota(all.begin(), all.end(), 0);
    return pick(all, top_k);
  }
  std::vector<int> ids(static_cast<std::size_t>(groups->num_groups));
  std::iota(ids.begin(), ids.end(), 0);
  const int per_group = experts / groups->num_groups;
  for (int grp : pick(ids, groups->group_topk)) {
    std::vector<int> members(static_cast<std::size_t>(per_group));
    std::iota(members.begin(), members.end(), grp * per_group);
    for (int e : pick(members, top_k / groups->group_topk)) out.push_back(e);
  }
  return out;
}

// The two hops counted token by token: the rows GPU 0 (node 0) sends over RDMA to node 1, and the
// rows it forwards over NVLink to GPU 1 of its node after receiving the tokens of position 0 of
// every node that hit node 0; per source token, against T x P(node) and N x T x P(gpu).
void expect_two_hops_match_sampling(int experts, int top_k, int ep, int nodes,
                                    std::optional<ModelSpec::RouterGroups> groups) {
  std::mt19937_64 rng(11);
  const int per_gpu = experts / ep, per_node = experts / nodes;
  const int tokens = 100'000;
  long rdma_to_node1 = 0, nvl_to_gpu1 = 0;
  for (int source = 0; source < nodes; ++source)
    for (int t = 0; t < tokens; ++t) {
      bool node0 = false, node1 = false, gpu1 = false;
      for (int e : route(rng, experts, top_k, groups)) {
        node0 |= e < per_node;
        node1 |= e >= per_node && e < 2 * per_node;
        gpu1 |= e >= per_gpu && e < 2 * per_gpu;  // GPU 1 of node 0
      }
      if (source == 0) rdma_to_node1 += node1;
      nvl_to_gpu1 += node0 && gpu1;
    }
  const DedupHits h = dedup_hits(experts, top_k, ep, nodes, groups);
  // Binomial standard errors near 0.002 at 100,000 tokens a source.
  EXPECT_NEAR(static_cast<double>(rdma_to_node1) / tokens, h.node, 0.006);
  EXPECT_NEAR(static_cast<double>(nvl_to_gpu1) / tokens, nodes * h.gpu, 0.006 * nodes);
}

TEST(DedupDispatch, TwoHopsMatchTokenByTokenCounting) {
  expect_two_hops_match_sampling(64, 6, 16, 4, std::nullopt);
  // Two groups of 8 a node, four experts a GPU, 2 of 8 groups a token.
  expect_two_hops_match_sampling(64, 4, 16, 4, ModelSpec::RouterGroups{8, 2});
  // One group a node.
  expect_two_hops_match_sampling(64, 8, 16, 4, ModelSpec::RouterGroups{4, 2});
}

TEST(DedupDispatch, GroupLimitedRoutingReachesTheChosenGroupsNodes) {
  // DeepSeek-V3 over ep 64 on 8 nodes: one group of 32 experts a node, 4 of 8 groups chosen, two
  // experts a chosen group on average, four experts a GPU.
  const DedupHits h = dedup_hits(256, 8, 64, 8, ModelSpec::RouterGroups{8, 4});
  EXPECT_DOUBLE_EQ(h.node, 0.5);
  EXPECT_NEAR(h.gpu, 0.5 * (1 - choose(28, 2) / choose(32, 2)), 1e-12);
  // Without the limit a token reaches more nodes.
  EXPECT_GT(dedup_hits(256, 8, 64, 8, std::nullopt).node, 0.65);
  // Two groups a node: a node is hit when one of its two groups is among the four chosen.
  const DedupHits two = dedup_hits(256, 8, 64, 4, ModelSpec::RouterGroups{8, 4});
  EXPECT_NEAR(two.node, 1 - choose(6, 4) / choose(8, 4), 1e-12);
  // Groups over two nodes: a node is hit when its group is chosen and one of its two draws lands
  // among the node's 16 of the group's 32 experts.
  const DedupHits wide = dedup_hits(256, 8, 64, 16, ModelSpec::RouterGroups{8, 4});
  EXPECT_NEAR(wide.node, 0.5 * (1 - choose(16, 2) / choose(32, 2)), 1e-12);
  EXPECT_NEAR(wide.gpu, h.gpu, 1e-15);
  // A GPU holding two whole groups: hit when one of them is chosen, never more often than its node.
  const DedupHits whole = dedup_hits(64, 8, 4, 2, ModelSpec::RouterGroups{8, 2});
  EXPECT_NEAR(whole.gpu, 1 - choose(6, 2) / choose(8, 2), 1e-12);
  EXPECT_LE(whole.gpu, whole.node);
  // Groups that straddle GPUs (12 experts a GPU, groups of 8): the uniform formula.
  EXPECT_NEAR(dedup_hits(96, 8, 8, 2, ModelSpec::RouterGroups{12, 4}).gpu, 1 - choose(84, 8) / choose(96, 8), 1e-12);
}

using testing::input_error_of;

StepSpec qwen_step(TokenDispatcher dispatcher) {
  StepSpec s;
  s.layout.gpus = 32;
  s.layout.pp = 2;
  s.layout.ep = 16;
  s.global_batch = 32;
  s.seq = 512;
  s.dispatcher = dispatcher;
  return s;
}

SimulatedStep simulate(const StepSpec& s) {
  return simulate_training_step(testing::model_preset("qwen3-30b-a3b"), testing::cluster_preset("dgx-h100-ndr", 32), s);
}

const CollectiveWork& collective(const TaskGraph& g, const std::string& id) {
  static const CollectiveWork kMissing;
  const std::optional<TaskIndex> i = g.find(id, -1);
  if (!i || !std::holds_alternative<CollectiveWork>(g.task(*i).work)) {
    ADD_FAILURE() << "no collective " << id;
    return kMissing;
  }
  return std::get<CollectiveWork>(g.task(*i).work);
}

// One all-to-allv over the expert group (ranks 0-15 on nodes 0 and 1): rank 0 sends to rank 8, its
// position's peer on the other node, the tokens that hit that node, and forwards to each GPU of
// its node the tokens both nodes' position-0 GPUs sent it that hit that GPU; nothing to the other
// ranks of node 1.
TEST(DedupDispatch, StepSendsOncePerNodeOverRdmaAndOncePerGpuOverNvlinkAtOnce) {
  const SimulatedStep sim = simulate(qwen_step(TokenDispatcher::kDeepEp));
  const TaskGraph& g = sim.graph.graph;
  const DedupHits hits = dedup_hits(128, 8, 16, 2, std::nullopt);
  const CollectiveWork& dispatch = collective(g, "mb0.L0.fwd.dispatch");
  ASSERT_TRUE(dispatch.is_all_to_allv());
  EXPECT_EQ(g.group(dispatch.group).size(), 16u);
  EXPECT_EQ(dispatch.traffic->row_bytes, 2048 * 2);  // bf16
  const TrafficMatrix& t = *dispatch.traffic;
  auto rows = [&](int s, int d) { return (*t.rows)[static_cast<std::size_t>(s * t.size + d)]; };
  EXPECT_EQ(rows(0, 8), std::llround(512 * hits.node));
  EXPECT_EQ(rows(5, 13), std::llround(512 * hits.node));
  EXPECT_EQ(rows(0, 9), 0);
  EXPECT_EQ(rows(0, 0), 0);
  EXPECT_EQ(rows(0, 1), std::llround(512 * 2 * hits.gpu));
  EXPECT_EQ(rows(15, 8), std::llround(512 * 2 * hits.gpu));
  EXPECT_FALSE(dispatch.transposed);
  // Back (the combine; the dispatch's gradient) the same paths the other way.
  EXPECT_TRUE(collective(g, "mb0.L0.fwd.combine").transposed);
  EXPECT_TRUE(collective(g, "mb0.L0.bwd.dispatch").transposed);
  EXPECT_FALSE(collective(g, "mb0.L0.bwd.combine").transposed);
  // The probabilities travel inside the tokens' dispatch.
  EXPECT_FALSE(g.find("mb0.L0.fwd.dispatch.probs", -1).has_value());
}

TEST(DedupDispatch, FewerBytesCrossTheFabricAndTheStepIsNoSlower) {
  const SimulatedStep deepep = simulate(qwen_step(TokenDispatcher::kDeepEp));
  const SimulatedStep alltoall = simulate(qwen_step(TokenDispatcher::kAllToAll));
  // All-to-all: 4,096 rows / 16 peers to each of the 8 ranks of the other node; DeepEP: each of
  // the 512 tokens once to that node when it hits it.
  const CollectiveWork& a2a = collective(alltoall.graph.graph, "mb0.L0.fwd.dispatch");
  const CollectiveWork& dedup = collective(deepep.graph.graph, "mb0.L0.fwd.dispatch");
  EXPECT_EQ(a2a.bytes_per_peer, 4096 / 16 * 2048 * 2);
  std::int64_t across = 0;
  for (int d = 8; d < 16; ++d) across += dedup.pair_bytes(0, d);
  // 512 x 0.996 rows against 8 x 256: a quarter of the bytes.
  EXPECT_NEAR(static_cast<double>(across) / (8.0 * a2a.bytes_per_peer), 0.249, 0.001);
  EXPECT_LT(deepep.run.trace.makespan_ns(), alltoall.run.trace.makespan_ns());
}

TEST(DedupDispatch, WithinOneNodeOnlyNvlinkCarriesTheTokens) {
  StepSpec s = qwen_step(TokenDispatcher::kDeepEp);
  s.layout.ep = 8;
  const SimulatedStep sim = simulate(s);
  const CollectiveWork& dispatch = collective(sim.graph.graph, "mb0.L0.fwd.dispatch");
  ASSERT_TRUE(dispatch.is_all_to_allv());
  EXPECT_EQ(sim.graph.graph.group(dispatch.group), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(dispatch.pair_bytes(0, 1), std::llround(512 * dedup_hits(128, 8, 8, 1, std::nullopt).gpu) * 2048 * 2);
}

TEST(DedupDispatch, RefusedForPaddingDroppingImbalanceDenseModelsAndUnevenNodes) {
  const StepSpec s = qwen_step(TokenDispatcher::kDeepEp);
  const ClusterSpec cluster = testing::cluster_preset("dgx-h100-ndr", 32);
  for (double f : {1.25, 0.5}) {
    ModelSpec capped = testing::model_preset("qwen3-30b-a3b");
    capped.dropless = false;
    capped.capacity_factor = f;
    const std::string err = input_error_of([&] { simulate_training_step(capped, cluster, s); });
    EXPECT_NE(err.find(f > 1 ? "capacity_factor 1.25 pads experts' rows" : "capacity_factor 0.5 drops experts' rows"),
              std::string::npos)
        << err;
  }
  StepSpec zipf = s;
  zipf.routing.kind = RoutingKind::kZipf;
  zipf.routing.zipf_exponent = 1.2;
  EXPECT_NE(input_error_of([&] { simulate(zipf); }).find("--dispatcher deepep with --routing zipf:1.2: not built"),
            std::string::npos);
  StepSpec dense = testing::small_gpt_step();
  dense.dispatcher = TokenDispatcher::kDeepEp;
  EXPECT_NE(testing::step_error_of(dense).find("--dispatcher deepep dispatches the tokens of MoE layers; GPT-1.7B"),
            std::string::npos);
  // 96 experts over ep 6 on three 8-GPU nodes: the representative group (ranks 0-5) lies in node 0,
  // the next (ranks 6-11) puts 2 on node 0 and 4 on node 1.
  ModelSpec six = testing::model_preset("qwen3-30b-a3b");
  six.num_experts = 96;
  StepSpec uneven = s;
  uneven.layout.gpus = 24;
  uneven.layout.pp = 1;
  uneven.layout.ep = 6;
  uneven.global_batch = 24;
  const ClusterSpec three_nodes = testing::cluster_preset("dgx-h100-ndr", 24);
  const std::string err = input_error_of([&] { simulate_training_step(six, three_nodes, uneven); });
  EXPECT_NE(err.find("the expert group of ranks 6 to 11 puts 2 on node 0 and 4 on node 1"), std::string::npos) << err;
}

}  // namespace
}  // namespace moesim
