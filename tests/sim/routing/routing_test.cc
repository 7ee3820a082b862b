// The routing model: parsing, water-filled top-k demand, capacity, chunk split, per-pair rows,
// imbalance statistics and the matrix file (sim/routing/routing.h).
#include "sim/routing/routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>

namespace moesim {
namespace {

namespace fs = std::filesystem;

std::int64_t sum(const std::vector<std::int64_t>& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{0}); }

TEST(RoutingSpec, ParsesTheThreeForms) {
  EXPECT_TRUE(parse_routing_spec("uniform", {}).balanced());
  const RoutingSpec z = parse_routing_spec("zipf:1.2", {});
  EXPECT_EQ(z.kind, RoutingKind::kZipf);
  EXPECT_DOUBLE_EQ(z.zipf_exponent, 1.2);
  EXPECT_EQ(z.to_string(), "zipf:1.2");
  EXPECT_EQ(parse_routing_spec("zipf:0", {}).zipf_exponent, 0.0);
  const RoutingSpec m = parse_routing_spec("matrix:counts.csv", {}, "/data/runs");
  EXPECT_EQ(m.kind, RoutingKind::kMatrix);
  EXPECT_EQ(m.matrix_path, "/data/runs/counts.csv");
  EXPECT_EQ(parse_routing_spec("matrix:/abs/c.csv", {}, "/data").matrix_path, "/abs/c.csv");
  EXPECT_EQ(parse_routing_spec("matrix:c.csv", {}).matrix_path, "c.csv");
}

TEST(RoutingSpec, RejectsBadValuesAtTheirPosition) {
  const SourceLocation at{"run.yaml", 4, 10};
  const auto message = [&](const std::string& text) {
    try {
      parse_routing_spec(text, at);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("zipf").rfind("run.yaml:4:10: routing 'zipf' needs an exponent", 0), 0u) << message("zipf");
  EXPECT_NE(message("zipf:x").find("is not a number"), std::string::npos);
  EXPECT_NE(message("zipf:-0.5").find("must be in [0, 100]"), std::string::npos);
  EXPECT_NE(message("zipf:nan").find("is not a number"), std::string::npos);
  EXPECT_NE(message("matrix:").find("needs a file"), std::string::npos);
  EXPECT_NE(message("Uniform").find("unknown routing 'Uniform'; valid: uniform, zipf:<s>"), std::string::npos);
}

TEST(RoutingDemand, EvenPopularitySplitsKBExactly) {
  // 3 experts, top-1, 10 tokens: 10/3 each, the remainder of 1 to the first expert after rotation.
  EXPECT_EQ(demand_from_popularity({1, 1, 1}, 1, 10, 0), (std::vector<std::int64_t>{4, 3, 3}));
  EXPECT_EQ(demand_from_popularity({1, 1, 1}, 1, 10, 1), (std::vector<std::int64_t>{3, 4, 3}));
  EXPECT_EQ(demand_from_popularity({1, 1, 1, 1}, 2, 8, 0), (std::vector<std::int64_t>{4, 4, 4, 4}));
}

TEST(RoutingDemand, WaterFillingCapsAnExpertAtOneChoicePerToken) {
  // top-2 over 10 tokens: expert 0 would get 2*10*100/103 = 19.4 choices, but a token can pick
  // it once: it takes all 10 tokens, and the other 10 choices spread evenly over the rest.
  const std::vector<std::int64_t> d = demand_from_popularity({100, 1, 1, 1}, 2, 10, 0);
  EXPECT_EQ(d[0], 10);
  EXPECT_EQ(sum(d), 20);
  EXPECT_EQ(std::vector<std::int64_t>(d.begin() + 1, d.end()), (std::vector<std::int64_t>{4, 3, 3}));
  // Two hot experts capped, the third absorbs what is left of k*B.
  EXPECT_EQ(demand_from_popularity({50, 50, 1}, 3, 7, 0), (std::vector<std::int64_t>{7, 7, 7}));
}

TEST(RoutingDemand, ExactCountsAreKeptAsWritten) {
  const std::vector<double> counts = {5, 0, 9, 2, 0, 4};  // k = 2, B = 10: 20 choices, none above 10
  const std::vector<std::int64_t> d = demand_from_popularity(counts, 2, 10, 3);
  EXPECT_EQ(d, (std::vector<std::int64_t>{5, 0, 9, 2, 0, 4}));
}

TEST(RoutingDemand, NeedsKExpertsWithTraffic) {
  EXPECT_THROW(demand_from_popularity({1, 0, 0, 0}, 2, 10, 0), InputError);
}

TEST(RoutingZipf, PopularityIsAPermutationOfTheZipfLaw) {
  const std::vector<double> p = zipf_popularity(16, 1.0, 7);
  std::vector<double> sorted = p;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (std::size_t r = 0; r < sorted.size(); ++r) EXPECT_DOUBLE_EQ(sorted[r], 1.0 / static_cast<double>(r + 1));
  EXPECT_NE(zipf_popularity(16, 1.0, 8), p);  // another seed places the hot experts elsewhere
  EXPECT_EQ(zipf_popularity(16, 1.0, 7), p);  // the same seed, the same placement
  for (double v : zipf_popularity(8, 0.0, 3)) EXPECT_DOUBLE_EQ(v, 1.0);
}

RoutingShape shape(int ranks, int experts, int k, std::int64_t tokens, std::int64_t capacity, int chunks) {
  RoutingShape s;
  s.ranks = ranks;
  s.experts = experts;
  s.top_k = k;
  s.tokens = tokens;
  s.capacity = capacity;
  s.chunks = chunks;
  return s;
}

TEST(RoutingPlan, CapacityChunksPairsAndStatsByHand) {
  // 2 ranks, 4 experts (rank 0 owns 0-1, rank 1 owns 2-3), top-1, B = 8, C = 3, n = 2.
  //   rank 0 demand: 6 1 1 0  -> kept 3 1 1 0 (3 dropped)
  //   rank 1 demand: 2 2 2 2  -> kept 2 2 2 2
  const std::vector<std::int64_t> demand = {6, 1, 1, 0, 2, 2, 2, 2};
  const RoutingPlan p(shape(2, 4, 1, 8, 3, 2), demand, "test");
  EXPECT_EQ(p.kept(0, 0), 3);
  EXPECT_EQ(p.kept(1, 3), 2);
  // Chunk 0 takes ceil, chunk 1 floor of each pair's kept rows:
  //   0 -> 0: experts 0, 1 kept 3 + 1 = c0 2 + 1, c1 1 + 0;  0 -> 1: expert 2 kept 1 = c0 1, c1 0
  //   1 -> 0: 2 + 2 = c0 1 + 1, c1 1 + 1;                     1 -> 1: 2 + 2 = c0 2, c1 2
  EXPECT_EQ(p.pair_rows(0, 0, 0), 3);
  EXPECT_EQ(p.pair_rows(1, 0, 0), 1);
  EXPECT_EQ(p.pair_rows(0, 0, 1), 1);
  EXPECT_EQ(p.pair_rows(1, 0, 1), 0);
  EXPECT_EQ(p.pair_rows(0, 1, 0), 2);
  EXPECT_EQ(p.pair_rows(1, 1, 1), 2);
  EXPECT_EQ(p.sent_rows(0, 0), 4);
  EXPECT_EQ(p.sent_rows(0, 1), 1);
  EXPECT_EQ(p.received_rows(0, 0) + p.received_rows(0, 1), 8);  // 3 + 1 + 2 + 2
  EXPECT_EQ(p.received_rows(1, 0) + p.received_rows(1, 1), 5);  // 1 + 0 + 2 + 2
  const RoutingStats& s = p.stats();
  EXPECT_EQ(s.routed, 16);
  EXPECT_EQ(s.dropped, 3);
  EXPECT_DOUBLE_EQ(s.expert_imbalance, 8.0 / 4.0);      // expert 0: 8 of 16 over 4 experts
  EXPECT_DOUBLE_EQ(s.kept_expert_imbalance, 5.0 / (13.0 / 4.0));
  EXPECT_DOUBLE_EQ(s.rank_imbalance, 8.0 / 6.5);
  EXPECT_EQ(s.busiest_expert, 0);
  EXPECT_EQ(s.busiest_rank, 0);
  EXPECT_NEAR(s.dropped_fraction(), 3.0 / 16.0, 1e-15);
}

TEST(RoutingPlan, ConservesRowsForEveryShape) {
  for (int n : {1, 3, 4}) {
    for (double s : {0.0, 0.8, 2.0}) {
      const RoutingShape sh = shape(8, 32, 2, 1000, 70, n);
      const RoutingPlan p = make_routing_plan(parse_routing_spec("zipf:" + std::to_string(s), {}), sh, 5);
      std::int64_t kept = 0, sent = 0, received = 0, pairs = 0;
      for (int r = 0; r < 8; ++r) {
        std::int64_t demand = 0;
        for (int e = 0; e < 32; ++e) {
          demand += p.demand(r, e);
          EXPECT_LE(p.demand(r, e), 1000);  // one choice per token and expert
          EXPECT_EQ(p.kept(r, e), std::min<std::int64_t>(p.demand(r, e), 70));
          kept += p.kept(r, e);
        }
        EXPECT_EQ(demand, 2000);  // k * B
        for (int c = 0; c < n; ++c) {
          sent += p.sent_rows(r, c);
          received += p.received_rows(r, c);
          for (int d = 0; d < 8; ++d) pairs += p.pair_rows(c, r, d);
        }
      }
      EXPECT_EQ(sent, kept);
      EXPECT_EQ(received, kept);
      EXPECT_EQ(pairs, kept);
      EXPECT_EQ(p.stats().routed - p.stats().dropped, kept);
    }
  }
}

TEST(RoutingPlan, SkewGrowsWithTheExponent) {
  const RoutingShape sh = shape(4, 64, 2, 4096, 1 << 20, 1);  // capacity out of the way
  double last = 0;
  for (double s : {0.0, 0.5, 1.0, 1.5}) {
    const RoutingPlan p = make_routing_plan(parse_routing_spec("zipf:" + std::to_string(s), {}), sh, 1);
    EXPECT_GT(p.stats().expert_imbalance, last);
    last = p.stats().expert_imbalance;
    EXPECT_EQ(p.stats().dropped, 0);
  }
  EXPECT_NEAR(make_routing_plan(parse_routing_spec("zipf:0", {}), sh, 1).stats().expert_imbalance, 1.0, 1e-12);
}

TEST(RoutingPlan, UniformStatsMatchAnEvenSpread) {
  // 64 experts, top-2, B = 4096: 128 choices per expert and rank; C = 102 (f = 0.8) drops 26.
  const RoutingStats s = uniform_routing_stats(shape(8, 64, 2, 4096, 102, 2));
  EXPECT_EQ(s.routed, 8 * 2 * 4096);
  EXPECT_EQ(s.dropped, 8 * 64 * 26);
  EXPECT_DOUBLE_EQ(s.expert_imbalance, 1.0);
  EXPECT_DOUBLE_EQ(s.rank_imbalance, 1.0);
}

class RoutingMatrixFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("moesim_routing_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& text) {
    const fs::path p = dir_ / "m.csv";
    std::ofstream(p) << text;
    return p.string();
  }
  std::string error(const std::string& text, int ranks = 2, int experts = 4) {
    const std::string path = write(text);
    try {
      read_routing_matrix(path, ranks, experts);
    } catch (const InputError& e) {
      return std::string(e.what()).substr(dir_.string().size() + 1);
    }
    return "no error";
  }
  fs::path dir_;
};

TEST_F(RoutingMatrixFile, ReadsOneRowOrOnePerRank) {
  const std::string path = write("# tokens routed per expert\n\n1, 2,3 ,4\n  5,6,7,8\n");
  const auto rows = read_routing_matrix(path, 2, 4);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1], (std::vector<double>{5, 6, 7, 8}));
  EXPECT_EQ(read_routing_matrix(write("0.5,0.25,0.125,0.125\n"), 8, 4).size(), 1u);
}

TEST_F(RoutingMatrixFile, NamesTheLineAndTheRule) {
  EXPECT_EQ(error("1,2,3\n"), "m.csv:1:1: routing matrix row has 3 columns; the model has 4 experts (one column per expert)");
  EXPECT_EQ(error("# c\n1,2,-3,4\n"), "m.csv:2:1: routing matrix column 3: -3 is negative; token counts must be >= 0");
  EXPECT_EQ(error("1,2,x,4\n"), "m.csv:1:1: routing matrix column 3: 'x' is not a number");
  EXPECT_EQ(error("1,2,,4\n"), "m.csv:1:1: routing matrix column 3: '' is not a number");
  EXPECT_EQ(error("0,0,0,0\n"), "m.csv:1:1: routing matrix row is all zeros: a source rank must route its tokens somewhere");
  EXPECT_NE(error("1,1,1,1\n1,1,1,1\n1,1,1,1\n").find("m.csv:3:1: routing matrix has more than 2 rows"), std::string::npos);
  EXPECT_NE(error("1,1,1,1\n2,2,2,2\n", 4).find("has 2 rows; it needs 1 (every rank alike) or 4"), std::string::npos);
  EXPECT_NE(error("# nothing\n").find("has 0 rows"), std::string::npos);
  const std::string missing = (dir_ / "absent.csv").string();
  EXPECT_THROW(read_routing_matrix(missing, 2, 4), InputError);
}

TEST_F(RoutingMatrixFile, PlanUsesExactCountsAndReportsTheRowOfATooNarrowRank) {
  // Rank 0 sends all 8 tokens (top-1) to expert 3; rank 1 spreads them.
  const std::string path = write("0,0,0,8\n2,2,2,2\n");
  const RoutingShape sh = shape(2, 4, 1, 8, 8, 1);
  const RoutingPlan p = make_routing_plan(parse_routing_spec("matrix:" + path, {}), sh, 1);
  EXPECT_EQ(p.demand(0, 3), 8);
  EXPECT_EQ(p.pair_rows(0, 0, 1), 8);
  EXPECT_EQ(p.pair_rows(0, 0, 0), 0);
  EXPECT_EQ(p.stats().busiest_rank, 1);  // experts 2-3: 8 + 2 + 2 rows
  // top-2 needs two experts with traffic on every row.
  try {
    make_routing_plan(parse_routing_spec("matrix:" + path, {}), shape(2, 4, 2, 8, 8, 1), 1);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("row of rank 0: the routing gives positive popularity to 1 experts, fewer "
                                         "than top_k = 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moesim
