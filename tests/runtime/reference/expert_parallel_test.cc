// Expert-parallel and chunked execution of the CPU reference against the unpartitioned layer
// (64 experts over 8 ranks == 64 experts on 1; n chunks == 1 chunk), bitwise agreement of the
// memory strategies, and each strategy's restore work against the simulator's task graph.
#include "runtime/reference/expert_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/build/moe_graph.h"
#include "sim/spec/hardware_spec.h"

namespace moesim::runtime::reference {
namespace {

ModelSpec model_64e(Activation act) {
  ModelSpec m;
  m.name = "ref-64e";
  m.d_model = 8;
  m.d_ffn = 12;
  m.num_experts = 64;
  m.top_k = 2;
  m.capacity_factor = 2.0;
  m.activation = act;
  return m;
}

ClusterSpec cluster_of(int gpus) {
  ClusterSpec c;
  c.name = "ref";
  c.node.gpus_per_node = gpus;
  c.num_nodes = 1;
  c.node.pcie_h2d.bandwidth = 25e9;  // s1-s3 offload over PCIe needs a bandwidth in the builder
  c.node.pcie_d2h.bandwidth = 25e9;
  return c;
}

RunSpec run_of(int ep, int chunks) {
  RunSpec r;
  r.tokens_per_gpu = 64;
  r.ep_size = ep;
  r.num_chunks = chunks;
  return r;
}

// The layer shape as the simulator derives it: C = floor(2 * 2.0 * 64 / 64) = 4 for every n in
// {1, 2, 4}, so the chunked runs compare against the same capacity.
MoeLayerShape shape_64e(Activation act, int ep, int chunks) {
  const ModelSpec m = model_64e(act);
  return MoeLayerShape::from_specs(m, derive_layer_dims(m, cluster_of(8), run_of(ep, chunks)));
}

std::vector<Matrix> batches(const MoeLayerShape& s, int ranks, std::uint64_t seed) {
  std::vector<Matrix> out;
  for (int r = 0; r < ranks; ++r)
    out.push_back(random_matrix(s.tokens, s.d_model, seed + static_cast<std::uint64_t>(r), 1.0));
  return out;
}

double max_rel(const std::vector<Matrix>& got, const std::vector<Matrix>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, compare(got[i], want[i]).relative());
  return worst;
}

void expect_gradients(const MoeGradients& got, const MoeGradients& want, bool bitwise, const std::string& what) {
  // The router's gradient depends on the chunking only through T_O, which is bitwise equal; the
  // shared experts run on each rank's whole batch, in rank order, on both sides.
  EXPECT_EQ(got.dgate, want.dgate) << what;
  EXPECT_EQ(got.dshared_w1, want.dshared_w1) << what;
  EXPECT_EQ(got.dshared_w2, want.dshared_w2) << what;
  if (bitwise) {
    EXPECT_EQ(got.dw1, want.dw1) << what;
    EXPECT_EQ(got.db1, want.db1) << what;
    EXPECT_EQ(got.dw2, want.dw2) << what;
    EXPECT_EQ(got.db2, want.db2) << what;
    return;
  }
  // Each expert sums its rows chunk by chunk instead of in one pass: only the association of the
  // additions differs, so the error is a few units of double rounding.
  constexpr double kRounding = 1e-13;
  EXPECT_LE(max_rel(got.dw1, want.dw1), kRounding) << what;
  EXPECT_LE(max_rel(got.db1, want.db1), kRounding) << what;
  EXPECT_LE(max_rel(got.dw2, want.dw2), kRounding) << what;
  EXPECT_LE(max_rel(got.db2, want.db2), kRounding) << what;
}

class ExpertParallel : public ::testing::TestWithParam<Activation> {};

TEST_P(ExpertParallel, SixtyFourExpertsOverRRanksAndNChunksEqualOneRankOneChunk) {
  constexpr int kRanks = 8;
  MoeLayerShape s = shape_64e(GetParam(), kRanks, 4);
  ASSERT_EQ(s.capacity, 4);
  s.bias = true;
  s.shared_d_ffn = 16;  // a shared expert on every rank's tokens
  const MoeLayerParams p = random_params(s, 21);
  const std::vector<Matrix> x = batches(s, kRanks, 100), dy = batches(s, kRanks, 200);
  std::int64_t dropped = 0;
  for (const Matrix& b : x) dropped += route(s, p.gate, b).num_dropped;
  ASSERT_GT(dropped, 0) << "the comparison must include dropped tokens";

  // R ranks bring one batch each and share the 64 experts; the ground truth runs the same R
  // batches on one process that owns all 64.
  for (int ranks : {1, 2, 4, 8}) {
    const std::vector<Matrix> xr(x.begin(), x.begin() + ranks), dyr(dy.begin(), dy.begin() + ranks);
    const ExpertParallelResult base = run_unpartitioned(s, p, xr, dyr);
    for (int n : {1, 2, 4}) {
      const std::string what = "R=" + std::to_string(ranks) + " n=" + std::to_string(n);
      const ExpertParallelResult got = run_expert_parallel(s, p, xr, dyr, {ranks, n, MemoryStrategy::kNone, 2});
      EXPECT_EQ(got.y, base.y) << what;    // every output row is computed by the same loops
      EXPECT_EQ(got.dx, base.dx) << what;
      expect_gradients(got.grads, base.grads, n == 1, what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, ExpertParallel,
                         ::testing::Values(Activation::kRelu, Activation::kGelu, Activation::kSwiglu),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Strategies, EveryStrategyAndSlotCountIsBitwiseIdenticalAtFixedRanksAndChunks) {
  for (int ranks : {1, 4}) {
    for (int n : {1, 2, 4}) {
      const MoeLayerShape s = shape_64e(Activation::kSwiglu, ranks, n);
      const MoeLayerParams p = random_params(s, 31);
      const std::vector<Matrix> x = batches(s, ranks, 300), dy = batches(s, ranks, 400);
      const ExpertParallelResult none = run_expert_parallel(s, p, x, dy, {ranks, n, MemoryStrategy::kNone, 2});
      for (MemoryStrategy st : {MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3, MemoryStrategy::kS4})
        for (int slots : {1, 2}) {
          const std::string what = std::string(to_string(st)) + " slots=" + std::to_string(slots) +
                                   " R=" + std::to_string(ranks) + " n=" + std::to_string(n);
          const ExpertParallelResult got = run_expert_parallel(s, p, x, dy, {ranks, n, st, slots});
          EXPECT_EQ(got.y, none.y) << what;
          EXPECT_EQ(got.dx, none.dx) << what;
          expect_gradients(got.grads, none.grads, true, what);
        }
    }
  }
}

// Per rank and layer, the restore work of each strategy equals the builder's tasks of that kind.
TEST(Strategies, RestoreWorkMatchesTheSimulatorsTaskGraph) {
  constexpr int kRanks = 4, kChunks = 4;
  for (MemoryStrategy st : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
                            MemoryStrategy::kS4}) {
    const ModelSpec m = model_64e(Activation::kGelu);
    RunSpec run = run_of(kRanks, kChunks);
    run.strategy = st;
    const TaskGraph g = build_moe_graph(m, cluster_of(8), run);
    ExecutionCounts sim;
    for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
      const Task& t = g.task(i);
      if (t.is_collective()) ++sim.all_to_alls;
      if (t.stage == "redispatch") ++sim.redispatches;
      if (t.stage == "offload") ++sim.d2h_copies;
      if (t.stage == "prefetch") ++sim.h2d_copies;
      if (t.id.find("recompute.fc1") != std::string::npos) ++sim.fc1_recomputes;
    }
    const MoeLayerShape s = MoeLayerShape::from_specs(m, derive_layer_dims(m, cluster_of(8), run));
    const MoeLayerParams p = random_params(s, 41);
    const ExpertParallelResult got =
        run_expert_parallel(s, p, batches(s, kRanks, 500), batches(s, kRanks, 600), {kRanks, kChunks, st, 2});
    EXPECT_EQ(got.counts, sim) << to_string(st);
  }
}

TEST(ExpertParallelOptions, RejectsPartitionsThatDoNotDivide) {
  const MoeLayerShape s = shape_64e(Activation::kRelu, 1, 1);  // E = 64, C = 4
  const MoeLayerParams p = random_params(s, 1);
  const std::vector<Matrix> x3 = batches(s, 3, 1);
  EXPECT_THROW(run_expert_parallel(s, p, x3, x3, {3, 1, MemoryStrategy::kNone, 2}), InputError);  // 64 % 3
  const std::vector<Matrix> x2 = batches(s, 2, 1);
  EXPECT_THROW(run_expert_parallel(s, p, x2, x2, {2, 3, MemoryStrategy::kNone, 2}), InputError);  // 4 % 3
  EXPECT_THROW(run_expert_parallel(s, p, x2, x2, {2, 1, MemoryStrategy::kS1, 3}), InputError);    // slots
  EXPECT_THROW(run_expert_parallel(s, p, x2, x2, {4, 1, MemoryStrategy::kNone, 2}), InputError);  // batches
}

}  // namespace
}  // namespace moesim::runtime::reference
