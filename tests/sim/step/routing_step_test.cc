// Imbalanced routing in the whole step (--routing with --global-batch, sim/step/moe_routing.h):
// the representative rank computes the most loaded expert-parallel rank's rows, the all-to-alls
// are all-to-allv over the routing plan's traffic, drops follow the capacity rule, and uniform
// routing stays the padded all-to-all. Qwen3-30B-A3B (128 experts of width 768, top 8, hidden
// 2,048, bf16, no capacity limit) on 16 A100s: tp 1, pp 2, sequences of 512 tokens, so each rank
// routes its N = 512 tokens, k N = 4,096 choices per microbatch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr std::int64_t kExperts = 128, kHidden = 2048, kRowBytes = kHidden * 2;

StepSpec two_rank_step(const std::string& routing) {
  StepSpec s = testing::small_moe_step_tp1();
  s.layout.ep = 2;  // expert group {0, 1} of stage 0: 64 local experts each
  s.routing = parse_routing_spec(routing, {});
  return s;
}

const Task& task(const TaskGraph& g, const std::string& id, int rank = 0) {
  const auto t = g.find(id, rank);
  EXPECT_TRUE(t.has_value()) << id;
  return g.task(t.value_or(0));
}

const GemmWork& gemm(const TaskGraph& g, const std::string& id) { return std::get<GemmWork>(task(g, id).work); }
const CollectiveWork& a2a(const TaskGraph& g, const std::string& id) {
  return std::get<CollectiveWork>(task(g, id, -1).work);
}

class StepRoutingMatrix : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("moesim_step_routing_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
             ".csv");
  }
  void TearDown() override { std::filesystem::remove(path_); }
  // `rows` lines of `columns` weights: 3 for the first half of the experts (expert-parallel rank
  // 0's with ep 2), 1 for the rest.
  std::string write(int rows, int columns) {
    std::ofstream out(path_);
    for (int r = 0; r < rows; ++r) {
      for (int e = 0; e < columns; ++e) out << (e ? "," : "") << (e < columns / 2 ? 3 : 1);
      out << "\n";
    }
    return "matrix:" + path_.string();
  }
  std::filesystem::path path_;
};

// Weights 3:1 give each hot expert 3 x 4,096 / 256 = 48 of a rank's choices and each cold one 16
// (all integers, no rounding). Dropless, rank 0 receives 2 ranks x 64 experts x 48 = 6,144 rows and
// rank 1 2,048: 3/4 of the 8,192 rows go to rank 0, 96 per local expert (uniform: 2 x 32 = 64).
TEST_F(StepRoutingMatrix, HotRankComputesThreeQuartersOfTheRowsDropless) {
  const ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  ASSERT_TRUE(model.dropless);
  const StepGraph step = build_step_graph(model, testing::a100_cluster(16), two_rank_step(write(1, kExperts)));
  ASSERT_TRUE(step.routing);
  EXPECT_EQ(step.routing->rank, 0);
  EXPECT_EQ(step.routing->total_received(), 6144);
  EXPECT_DOUBLE_EQ(step.routing->stats.rank_imbalance, 1.5);
  EXPECT_EQ(step.routing->stats.dropped, 0);
  const TaskGraph& g = step.graph;
  // fc1: 64 local experts x 96 rows x (2 x 768) x 2,048: 2 x 64 x 96 x 1,536 x 2,048 FLOPs.
  const GemmWork& fc1 = gemm(g, "mb0.L0.fwd.experts.fc1");
  EXPECT_EQ(fc1.batch, 64);
  EXPECT_EQ(fc1.m, 96);
  EXPECT_EQ(fc1.n, 1536);
  EXPECT_EQ(fc1.k, kHidden);
  EXPECT_EQ(fc1.flops(), std::int64_t{2} * 64 * 96 * 1536 * 2048);
  EXPECT_EQ(gemm(g, "mb1.L23.bwd.experts.fc1.dgrad").m, 96);
  EXPECT_EQ(gemm(g, "mb1.L23.bwd.experts.fc2.wgrad").k, 96);
  // The dispatch: each rank sends 64 x 48 = 3,072 rows to rank 0 and 64 x 16 = 1,024 to rank 1,
  // 4,096 bytes a row; the combine sends them back; the probabilities one bf16 value a row.
  for (const std::string id : {"mb0.L0.fwd.dispatch", "mb1.L5.bwd.combine"}) {
    const CollectiveWork& w = a2a(g, id);
    ASSERT_TRUE(w.is_all_to_allv()) << id;
    EXPECT_EQ(w.pair_bytes(1, 0), 3072 * kRowBytes) << id;
    EXPECT_EQ(w.pair_bytes(0, 1), 1024 * kRowBytes) << id;
    EXPECT_EQ(w.pair_bytes(0, 0), 3072 * kRowBytes) << id;
  }
  for (const std::string id : {"mb0.L0.fwd.combine", "mb1.L5.bwd.dispatch"}) {
    const CollectiveWork& w = a2a(g, id);
    EXPECT_EQ(w.pair_bytes(0, 1), 3072 * kRowBytes) << id;
    EXPECT_EQ(w.pair_bytes(1, 0), 1024 * kRowBytes) << id;
  }
  EXPECT_EQ(a2a(g, "mb0.L0.fwd.dispatch.probs").pair_bytes(1, 0), 3072 * 2);
  // The permutation writes the 4,096 rows rank 0 sends.
  const auto& permute = std::get<ElementwiseWork>(task(g, "mb0.L0.fwd.permute").work);
  EXPECT_EQ(permute.bytes_written, 4096 * kRowBytes);
}

// With a capacity factor of 1, C = floor(8 x 512 / 128) = 32 rows per (source, expert): each hot
// expert keeps 32 of its 48, so rank 0 receives 2 x 64 x 32 = 4,096 rows (2/3 of 6,144), 64 per
// expert as uniform's, and 2 x 64 x 16 = 2,048 choices (a quarter) are dropped.
TEST_F(StepRoutingMatrix, ACapacityFactorDropsAsTheLayerSimulationDoes) {
  ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  model.dropless = false;
  model.capacity_factor = 1.0;
  const StepGraph step = build_step_graph(model, testing::a100_cluster(16), two_rank_step(write(1, kExperts)));
  EXPECT_EQ(step.routing->total_received(), 4096);
  EXPECT_EQ(step.routing->stats.dropped, 2048);
  EXPECT_DOUBLE_EQ(step.routing->stats.dropped_fraction(), 0.25);
  EXPECT_EQ(gemm(step.graph, "mb0.L0.fwd.experts.fc1").m, 64);
  EXPECT_EQ(a2a(step.graph, "mb0.L0.fwd.dispatch").pair_bytes(1, 0), 2048 * kRowBytes);
  // Rank 0 sends its 2,048 kept hot rows and 1,024 cold ones.
  EXPECT_EQ(std::get<ElementwiseWork>(task(step.graph, "mb0.L0.fwd.permute").work).bytes_written, 3072 * kRowBytes);
}

TEST_F(StepRoutingMatrix, AMatrixThatDoesNotFitTheStepNamesTheFlagAndTheRule) {
  const ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  const ClusterSpec cluster = testing::a100_cluster(16);
  const auto error = [&](const std::string& routing) {
    try {
      build_step_graph(model, cluster, two_rank_step(routing));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(error(write(3, kExperts)),
              ::testing::AllOf(::testing::HasSubstr(".csv:3:1: --routing: routing matrix has more than 2 rows"),
                               ::testing::HasSubstr("(the step's MoE layers: ep = 2 ranks, 128 experts, top_k = 8)")));
  EXPECT_THAT(error(write(2, 64)),
              ::testing::HasSubstr(".csv:1:1: --routing: routing matrix row has 64 columns; the model has 128 experts"));
}

TEST(StepRouting, ADenseModelRefusesARouting) {
  StepSpec s = testing::small_gpt_step();
  s.routing = parse_routing_spec("zipf:1.2", {});
  EXPECT_THAT(testing::step_error_of(s), ::testing::HasSubstr("--routing zipf:1.2 spreads tokens over experts; "));
}

// zipf:0 spreads the 4,096 choices evenly, 32 per (source, expert): the rows of uniform routing,
// but sent as an all-to-allv.
TEST(StepRouting, EvenZipfComputesUniformRows) {
  const ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  const StepGraph uniform = build_step_graph(model, testing::a100_cluster(16), two_rank_step("uniform"));
  const StepGraph even = build_step_graph(model, testing::a100_cluster(16), two_rank_step("zipf:0"));
  EXPECT_FALSE(uniform.routing);
  EXPECT_FALSE(a2a(uniform.graph, "mb0.L0.fwd.dispatch").is_all_to_allv());
  EXPECT_EQ(a2a(uniform.graph, "mb0.L0.fwd.dispatch").bytes_per_peer, kExperts * 32 * kRowBytes / 2);
  EXPECT_EQ(gemm(uniform.graph, "mb0.L0.fwd.experts.fc1").m, 64);
  EXPECT_EQ(gemm(even.graph, "mb0.L0.fwd.experts.fc1").m, 64);
  EXPECT_EQ(a2a(even.graph, "mb0.L0.fwd.dispatch").pair_bytes(0, 1), 64 * 32 * kRowBytes);
  EXPECT_EQ(uniform.graph.num_tasks(), even.graph.num_tasks());
}

// The plan is made from the seed alone: the same seed gives the same step; a skewed routing makes
// the group wait for its most loaded rank, so the step is slower than uniform's.
TEST(StepRouting, ZipfIsDeterministicAndSlowerThanUniform) {
  const ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  const ClusterSpec cluster = testing::a100_cluster(16);
  StepSpec zipf = testing::small_moe_step();
  zipf.routing = parse_routing_spec("zipf:1.2", {});
  zipf.seed = 7;
  const SimulatedStep a = simulate_training_step(model, cluster, zipf);
  const SimulatedStep b = simulate_training_step(model, cluster, zipf);
  const SimulatedStep uniform = simulate_training_step(model, cluster, testing::small_moe_step());
  EXPECT_EQ(a.report.step_ns, b.report.step_ns);
  EXPECT_EQ(a.graph.routing->rank, b.graph.routing->rank);
  EXPECT_EQ(a.graph.routing->received, b.graph.routing->received);
  EXPECT_GT(a.graph.routing->stats.rank_imbalance, 1.0);
  EXPECT_GT(gemm(a.graph.graph, "mb0.L0.fwd.experts.fc1").m, gemm(uniform.graph.graph, "mb0.L0.fwd.experts.fc1").m);
  EXPECT_GT(a.report.step_ns, uniform.report.step_ns);
}

}  // namespace
}  // namespace moesim
