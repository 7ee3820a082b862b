// The routing code shared by the CUDA kernels and the host emulation (runtime/kernels/routing.h):
// top-k order and its tie and NaN rules at any k, the router gradient against a double-precision
// derivative, and the GPU's sort-based capacity assignment (run here with std::stable_sort in
// place of cub's stable radix sort) against the sequential definition (host::assign).
#include "runtime/kernels/routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "assignment_cases.h"
#include "runtime/kernels/host_kernels.h"

namespace moesim::runtime {
namespace {

struct Routed {
  std::vector<float> p, score;
  std::vector<std::int32_t> idx;
};

Routed route(const std::vector<float>& logits, int k, bool normalize) {
  const int E = static_cast<int>(logits.size());
  Routed r{std::vector<float>(E), std::vector<float>(k), std::vector<std::int32_t>(k)};
  HostLanes lanes;  // the 32 lanes of the GPU's warp, played in turn
  route_token(lanes, logits.data(), E, k, normalize, r.p.data(), r.idx.data(), r.score.data());
  return r;
}

TEST(RouteToken, PicksTheFirstKOfDescendingProbabilityWithTiesToTheLowerIndex) {
  std::mt19937 rng(3);
  for (int E : {1, 2, 7, 31, 32, 33, 64, 100, 2048})  // fewer experts than lanes, and ragged lanes
    for (int k : {1, 2, 8, 16, 33}) {
      if (k > E) continue;
      // Logits on a coarse grid: many exact ties.
      std::uniform_int_distribution<int> level(0, 5);
      std::vector<float> logits(static_cast<std::size_t>(E));
      for (float& l : logits) l = 0.5f * static_cast<float>(level(rng));
      const Routed r = route(logits, k, false);
      std::vector<int> order(static_cast<std::size_t>(E));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r.p[a] > r.p[b]; });
      for (int j = 0; j < k; ++j) {
        EXPECT_EQ(r.idx[j], order[j]) << "E " << E << " k " << k << " j " << j;
        EXPECT_EQ(r.score[j], r.p[order[j]]);
      }
      const float sum = std::accumulate(r.p.begin(), r.p.end(), 0.0f);
      EXPECT_NEAR(sum, 1.0f, 1e-4f);
    }
}

// The lanes' partial sums, combined by the butterfly, still give the softmax to fp32 accuracy.
TEST(RouteToken, ProbabilitiesAreTheSoftmaxWhateverTheNumberOfLanesUsed) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (int E : {1, 5, 31, 32, 33, 100, 1000, 5000}) {
    std::vector<float> logits(static_cast<std::size_t>(E));
    for (float& l : logits) l = normal(rng);
    const Routed r = route(logits, 1, false);
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - mx);
    for (int e = 0; e < E; ++e) {
      const double want = std::exp(static_cast<double>(logits[e]) - mx) / sum;
      EXPECT_NEAR(r.p[e], want, 1e-5 * want + 1e-12) << "E " << E << " e " << e;
    }
  }
}

TEST(RouteToken, NormalizedScoresSumToOne) {
  const Routed r = route({0.1f, 2.0f, -1.0f, 1.5f, 0.3f}, 3, true);
  EXPECT_EQ(r.idx, (std::vector<std::int32_t>{1, 3, 4}));
  EXPECT_NEAR(r.score[0] + r.score[1] + r.score[2], 1.0f, 1e-6f);
  EXPECT_NEAR(r.score[0] / r.score[1], std::exp(0.5f), 1e-5f);
}

TEST(RouteToken, NaNProbabilitiesStillGiveKDistinctExperts) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<float>& logits : {std::vector<float>{nan, nan, nan, nan}, std::vector<float>{1.f, nan, 0.f, 2.f}}) {
    const Routed r = route(logits, 4, false);
    std::vector<std::int32_t> sorted = r.idx;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<std::int32_t>{0, 1, 2, 3}));
  }
  EXPECT_TRUE(ranks_before(0.f, 5, nan, 0));
  EXPECT_FALSE(ranks_before(nan, 0, 0.f, 5));
  EXPECT_TRUE(ranks_before(nan, 1, nan, 2));
}

// L = sum_j ds_j score_j(logits) with the choices held fixed, in double.
double loss(const std::vector<double>& logits, const std::vector<std::int32_t>& idx, const std::vector<float>& ds,
            bool normalize) {
  double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (double l : logits) sum += std::exp(l - mx);
  double chosen = 0;
  for (std::int32_t e : idx) chosen += std::exp(logits[e] - mx) / sum;
  double out = 0;
  for (std::size_t j = 0; j < idx.size(); ++j) {
    const double p = std::exp(logits[idx[j]] - mx) / sum;
    out += ds[j] * (normalize ? p / chosen : p);
  }
  return out;
}

TEST(RouteGradient, EqualsTheDerivativeOfTheScoresAtAnyTopK) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int E : {4, 40, 1500})
    for (int k : {1, 3, 12})
      for (bool normalize : {false, true}) {
        if (k > E) continue;
        std::vector<float> logits(static_cast<std::size_t>(E)), ds(static_cast<std::size_t>(k));
        for (float& l : logits) l = 2.f * normal(rng);
        for (float& d : ds) d = normal(rng);
        const Routed r = route(logits, k, normalize);
        const RouteGradTerms g = route_grad_terms(r.p.data(), r.idx.data(), r.score.data(), ds.data(), k, normalize);
        std::vector<double> x(logits.begin(), logits.end());
        double scale = 0;
        std::vector<double> analytic(static_cast<std::size_t>(E)), numeric(static_cast<std::size_t>(E));
        for (int e = 0; e < E; ++e) {
          analytic[e] = route_dlogit(e, r.p.data(), r.idx.data(), ds.data(), k, normalize, g);
          const double h = 1e-6, keep = x[e];
          x[e] = keep + h;
          const double up = loss(x, r.idx, ds, normalize);
          x[e] = keep - h;
          numeric[e] = (up - loss(x, r.idx, ds, normalize)) / (2 * h);
          x[e] = keep;
          scale = std::max(scale, std::abs(numeric[e]));
        }
        for (int e = 0; e < E; ++e)
          EXPECT_NEAR(analytic[e], numeric[e], 1e-4 * scale + 1e-9)
              << "E " << E << " k " << k << " normalize " << normalize << " expert " << e;
      }
}

// moe_kernels.cu's assign, step by step, with std::stable_sort for the device's radix sort.
void assign_by_sorting(const AssignArgs& a) {
  const std::int64_t n = a.tokens * a.top_k;
  std::fill(a.row_token, a.row_token + a.experts * a.capacity, -1);
  std::fill(a.row_choice, a.row_choice + a.experts * a.capacity, -1);
  std::fill(a.tokens_per_expert, a.tokens_per_expert + a.experts, 0);
  std::vector<std::uint32_t> keys(static_cast<std::size_t>(n));
  std::vector<std::int32_t> choice(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    keys[i] = assignment_key(a.topk_idx, a.tokens, a.top_k, i);
    choice[i] = static_cast<std::int32_t>(i);
  }
  std::stable_sort(choice.begin(), choice.end(), [&](std::int32_t x, std::int32_t y) { return keys[x] < keys[y]; });
  std::vector<std::uint32_t> sorted_keys(static_cast<std::size_t>(n));
  for (std::int64_t s = 0; s < n; ++s) sorted_keys[s] = keys[choice[s]];
  // Unvisited entries stay poisoned: only the experts that were chosen may be read.
  std::vector<std::int32_t> run_start(static_cast<std::size_t>(a.experts), -1000000);
  for (std::int64_t s = 0; s < n; ++s) record_run_start(sorted_keys.data(), s, run_start.data());
  for (std::int64_t s = n - 1; s >= 0; --s)  // any order: each position writes its own outputs
    place_assignment(a, sorted_keys.data(), choice.data(), run_start.data(), s);
}

TEST(CapacityAssignment, SortingEqualsTheSequentialDefinition) {
  std::mt19937 rng(5);
  const testing::AssignmentCase cases[] = {{1, 1, 1, 1, 1},      {37, 3, 2, 8, 4},     {256, 8, 2, 64, 4},
                                           {256, 8, 2, 16, 2},   {1000, 64, 8, 40, 8}, {500, 2048, 16, 4, 2},
                                           {300, 5000, 12, 2, 1}, {128, 4, 3, 1, 1},   {200, 16, 16, 400, 8}};
  for (const testing::AssignmentCase& c : cases)
    for (bool skewed : {false, true}) {
      const std::vector<std::int32_t> topk_idx = testing::random_choices(c, skewed, rng);
      testing::Assignment sequential, sorted;
      host::assign(sequential.args(topk_idx, c));
      assign_by_sorting(sorted.args(topk_idx, c));
      const std::string label = c.label(skewed);
      EXPECT_TRUE(sequential == sorted) << label;
      // The kept count is what the rows hold; a skewed case short of capacity drops.
      const auto kept = std::count_if(sorted.topk_row.begin(), sorted.topk_row.end(), [](int r) { return r >= 0; });
      EXPECT_EQ(kept, std::accumulate(sorted.tokens_per_expert.begin(), sorted.tokens_per_expert.end(), 0LL)) << label;
      EXPECT_EQ(kept, std::count_if(sorted.row_token.begin(), sorted.row_token.end(), [](int t) { return t >= 0; }))
          << label;
      if (skewed && c.capacity < c.tokens) {
        EXPECT_LT(kept, c.tokens * c.k) << label;
      }
    }
}

}  // namespace
}  // namespace moesim::runtime
