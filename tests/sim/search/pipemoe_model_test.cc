#include "sim/search/pipemoe_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "sim/core/error.h"

namespace moesim::search {
namespace {

// Builds params from X = b_a*n_d and Y = b_e*n_e with exactly representable betas, so the
// hand arithmetic below is the arithmetic the code does.
PipeMoeParams make(double a_a, double x, double a_e, double y) {
  PipeMoeParams p;
  p.a2a_alpha_s = a_a;
  p.a2a_beta_s_per_byte = 1.0 / 1024.0;
  p.dispatch_bytes = x * 1024.0;
  p.expert_alpha_s = a_e;
  p.expert_beta_s_per_unit = 1.0 / 256.0;
  p.expert_work = y * 256.0;
  return p;
}

TEST(PipeMoeModel, RegimeFormulasAsWritten) {
  // a_a = 1, X = 3, a_e = 0.25, Y = 7, r = 3:
  // a_3 = 1 + 3/3 = 2, e_3 = 0.25 + 7/3; T3 = 2 + 7 + 2 + 0.75 = 11.75; T4 = T2 = 6 + 6 = 12;
  // T1 = 2*(1 + 3) + 0.25 + 7 = 15.25.
  const PipeMoeParams p = make(1.0, 3.0, 0.25, 7.0);
  EXPECT_DOUBLE_EQ(chunk_a2a_time_s(p, 3), 2.0);
  EXPECT_DOUBLE_EQ(chunk_expert_time_s(p, 3), 0.25 + 7.0 / 3.0);
  EXPECT_DOUBLE_EQ(t1_time_s(p), 15.25);
  EXPECT_DOUBLE_EQ(t3_time_s(p, 3), 11.75);
  EXPECT_DOUBLE_EQ(t4_time_s(p, 3), 12.0);
  EXPECT_DOUBLE_EQ(t2_time_s(p, 3), 12.0);
  EXPECT_DOUBLE_EQ(pipelined_time_s(p, 1), 15.25);
  EXPECT_DOUBLE_EQ(pipelined_time_s(p, 3), 12.0);
  EXPECT_EQ(regime_name(PipeMoeRegime::kT1NoPipeline), "T1");
  EXPECT_EQ(regime_name(PipeMoeRegime::kT2CommPerChunk), "T2");
  EXPECT_EQ(regime_name(PipeMoeRegime::kT3ComputeOverall), "T3");
  EXPECT_EQ(regime_name(PipeMoeRegime::kT4CommOverall), "T4");
}

TEST(PipeMoeModel, OptimumAtOneWhenLatencyDominates) {
  // a_a = 1, X = 0.5, a_e = 0.25, Y = 1.
  // T(1) = 2*(1 + 0.5) + 0.25 + 1 = 4.25.
  // T(2) = max(T3 = 2 + 1 + 0.5 + 0.5 = 4, T4 = 4 + 1 = 5) = 5, and T(r) >= T4(r) = 2r + 1 grows.
  const PipeMoeParams p = make(1.0, 0.5, 0.25, 1.0);
  const PipeMoeChoice c = optimal_degree(p, 8);
  EXPECT_EQ(c.degree, 1);
  EXPECT_DOUBLE_EQ(c.time_s, 4.25);
  EXPECT_EQ(c.regime, PipeMoeRegime::kT1NoPipeline);
  ASSERT_EQ(c.time_by_degree_s.size(), 8u);
  EXPECT_DOUBLE_EQ(c.time_by_degree_s[1], 5.0);
  // r* = sqrt(2*0.5/0.25) = 2.
  EXPECT_DOUBLE_EQ(c.t3_minimiser, 2.0);
}

TEST(PipeMoeModel, CommDominatedPerChunk) {
  // a_a = 1/16, X = 4, a_e = 0.5, Y = 3.
  // T(1) = 2*(0.0625 + 4) + 0.5 + 3 = 11.625.
  // r = 2: a_2 = 0.0625 + 2 = 2.0625, e_2 = 0.5 + 1.5 = 2 <= a_2 (T2);
  //        T = max(2*2.0625 + 2*2 = 8.125, 4*2.0625 = 8.25) = 8.25.
  // r = 3: T4 = 6/16 + 8 = 8.375 > T3 = 0.125 + 3 + 8/3 + 1.5 = 7.29; T4 grows with r after.
  const PipeMoeParams p = make(0.0625, 4.0, 0.5, 3.0);
  const PipeMoeChoice c = optimal_degree(p, 8);
  EXPECT_EQ(c.degree, 2);
  EXPECT_DOUBLE_EQ(c.time_s, 8.25);
  EXPECT_EQ(c.regime, PipeMoeRegime::kT2CommPerChunk);
  EXPECT_DOUBLE_EQ(c.time_by_degree_s[0], 11.625);
  EXPECT_DOUBLE_EQ(c.time_by_degree_s[2], 8.375);
}

TEST(PipeMoeModel, ComputeDominatedInteriorOptimumNearRStar) {
  // a_a = 1/16, X = 4, a_e = 0.25, Y = 6. T3(r) = 0.125 + 6 + 8/r + 0.25 r, T4(r) = r/8 + 8.
  // r* = sqrt(2*4/0.25) = sqrt(32) = 5.657, round(r*) = 6.
  // T3(5) = 6.125 + 1.6 + 1.25 = 8.975 (T4(5) = 8.625)
  // T3(6) = 6.125 + 4/3 + 1.5 = 8.9583 (T4(6) = 8.75): optimum, e_6 = 1.25 > a_6 = 0.729
  // T3(7) = 6.125 + 8/7 + 1.75 = 9.018 (T4(7) = 8.875)
  const PipeMoeParams p = make(0.0625, 4.0, 0.25, 6.0);
  const PipeMoeChoice c = optimal_degree(p, 16);
  EXPECT_EQ(c.degree, 6);
  EXPECT_NEAR(c.time_s, 6.125 + 4.0 / 3.0 + 1.5, 1e-12);
  EXPECT_EQ(c.regime, PipeMoeRegime::kT3ComputeOverall);
  EXPECT_DOUBLE_EQ(c.t3_minimiser, std::sqrt(32.0));
  EXPECT_EQ(c.degree, static_cast<int>(std::lround(c.t3_minimiser)));
  EXPECT_NEAR(c.time_by_degree_s[4], 8.975, 1e-12);
  EXPECT_NEAR(c.time_by_degree_s[6], 6.125 + 8.0 / 7.0 + 1.75, 1e-12);
  // Capped below r*, the cap is the answer (T3 still falls there).
  EXPECT_EQ(optimal_degree(p, 4).degree, 4);
}

TEST(PipeMoeModel, CommDominatedOverallAtTheCrossing) {
  // a_a = 1, X = 3, a_e = 0.25, Y = 7. T3(r) = 9 + 6/r + r/4, T4(r) = 2r + 6.
  // T(1) = 15.25; T(2) = max(12.5, 10) = 12.5 (T3); T(3) = max(11.75, 12) = 12 with
  // e_3 = 2.583 > a_3 = 2 (T4); T(4) = max(11.5, 14) = 14. The optimum r = 3 sits where falling
  // T3 meets rising T4, below r* = sqrt(24) = 4.9: why each regime is minimised over its valid r.
  const PipeMoeParams p = make(1.0, 3.0, 0.25, 7.0);
  const PipeMoeChoice c = optimal_degree(p, 8);
  EXPECT_EQ(c.degree, 3);
  EXPECT_DOUBLE_EQ(c.time_s, 12.0);
  EXPECT_EQ(c.regime, PipeMoeRegime::kT4CommOverall);
  EXPECT_EQ(regime_at(p, 2), PipeMoeRegime::kT3ComputeOverall);
  EXPECT_DOUBLE_EQ(c.t3_minimiser, std::sqrt(24.0));
}

TEST(PipeMoeModel, TiesGoToTheSmallerDegree) {
  // a_a = 1, X = 3, a_e = 0, Y = 7: T(2) = max(2 + 7 + 3, 4 + 6) = 12,
  // T(3) = max(2 + 7 + 2, 6 + 6) = 12, T(4) = 14. Both 2 and 3 give 12 -> 2.
  // r* = +inf (a_e = 0, T3 keeps falling).
  const PipeMoeParams p = make(1.0, 3.0, 0.0, 7.0);
  const PipeMoeChoice c = optimal_degree(p, 8);
  EXPECT_DOUBLE_EQ(c.time_by_degree_s[1], 12.0);
  EXPECT_DOUBLE_EQ(c.time_by_degree_s[2], 12.0);
  EXPECT_EQ(c.degree, 2);
  EXPECT_TRUE(std::isinf(c.t3_minimiser));
  EXPECT_EQ(t3_unconstrained_minimiser(make(1.0, 0.0, 0.0, 7.0)), 0.0);
}

TEST(PipeMoeModel, RMaxOneAndAllZero) {
  const PipeMoeParams p = make(0.0625, 4.0, 0.25, 6.0);
  const PipeMoeChoice c = optimal_degree(p, 1);
  EXPECT_EQ(c.degree, 1);
  EXPECT_EQ(c.time_by_degree_s.size(), 1u);
  const PipeMoeChoice zero = optimal_degree(PipeMoeParams{}, 8);
  EXPECT_EQ(zero.degree, 1);
  EXPECT_EQ(zero.time_s, 0.0);
}

// Brute force straight from the definition, with the regime identities checked on the way.
TEST(PipeMoeModel, ExactIntegerMinimiserMatchesBruteForce) {
  std::mt19937_64 rng(20240607);
  std::uniform_real_distribution<double> log_scale(-6.0, 2.0);
  std::uniform_int_distribution<int> r_max_dist(1, 64);
  std::uniform_int_distribution<int> zero_dist(0, 9);
  int seen_regime[4] = {0, 0, 0, 0};
  for (int seed = 0; seed < 1000; ++seed) {
    const auto draw = [&] { return zero_dist(rng) == 0 ? 0.0 : std::pow(10.0, log_scale(rng)); };
    PipeMoeParams p;
    p.a2a_alpha_s = draw();
    p.a2a_beta_s_per_byte = draw() * 1e-9;
    p.dispatch_bytes = draw() * 1e9;
    p.expert_alpha_s = draw();
    p.expert_beta_s_per_unit = draw() * 1e-12;
    p.expert_work = draw() * 1e12;
    const int r_max = r_max_dist(rng);

    int best_r = 0;
    double best_t = std::numeric_limits<double>::infinity();
    for (int r = 1; r <= r_max; ++r) {
      const double t_d = p.a2a_alpha_s + p.a2a_beta_s_per_byte * p.dispatch_bytes;
      const double t_e = p.expert_alpha_s + p.expert_beta_s_per_unit * p.expert_work;
      const double a_r = p.a2a_alpha_s + p.a2a_beta_s_per_byte * p.dispatch_bytes / r;
      const double e_r = p.expert_alpha_s + p.expert_beta_s_per_unit * p.expert_work / r;
      const double t = r == 1 ? 2 * t_d + t_e : std::max(2 * a_r + r * e_r, 2 * r * a_r);
      // The closed forms name the same quantities (up to rounding).
      const double scale = std::max(1.0, t) * 1e-12;
      ASSERT_NEAR(std::max(t3_time_s(p, r), t4_time_s(p, r)), t, scale) << "seed " << seed;
      ASSERT_NEAR(t4_time_s(p, r), 2 * r * a_r, scale);
      if (t < best_t) {
        best_t = t;
        best_r = r;
      }
    }
    const PipeMoeChoice c = optimal_degree(p, r_max);
    ASSERT_EQ(c.degree, best_r) << "seed " << seed;
    ASSERT_EQ(c.time_s, best_t) << "seed " << seed;
    ASSERT_EQ(c.time_by_degree_s.size(), static_cast<std::size_t>(r_max));
    ASSERT_GE(c.degree, 1);
    ++seen_regime[static_cast<int>(c.regime)];
  }
  // The random draws exercise every regime at the optimum.
  for (int i = 0; i < 4; ++i) EXPECT_GT(seen_regime[i], 0) << "regime T" << i + 1;
}

TEST(PipeMoeModel, InvalidInputsNameTheValue) {
  const PipeMoeParams good = make(1.0, 1.0, 1.0, 1.0);
  const double bad_values[] = {-1.0, std::numeric_limits<double>::quiet_NaN(),
                               std::numeric_limits<double>::infinity()};
  double PipeMoeParams::*fields[] = {
      &PipeMoeParams::a2a_alpha_s,    &PipeMoeParams::a2a_beta_s_per_byte,
      &PipeMoeParams::expert_alpha_s, &PipeMoeParams::expert_beta_s_per_unit,
      &PipeMoeParams::dispatch_bytes, &PipeMoeParams::expert_work};
  const char* names[] = {"a2a_alpha_s",    "a2a_beta_s_per_byte",
                         "expert_alpha_s", "expert_beta_s_per_unit",
                         "dispatch_bytes", "expert_work"};
  for (int f = 0; f < 6; ++f) {
    for (double bad : bad_values) {
      PipeMoeParams p = good;
      p.*fields[f] = bad;
      try {
        optimal_degree(p, 4);
        FAIL() << names[f] << " = " << bad << " accepted";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(names[f]), std::string::npos) << e.what();
      }
    }
  }
  try {
    optimal_degree(good, 0);
    FAIL() << "r_max = 0 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("r_max"), std::string::npos);
  }
  EXPECT_THROW(optimal_degree(good, -3), InputError);
  EXPECT_THROW(optimal_degree(good, kMaxPipelineDegree + 1), InputError);
  EXPECT_THROW(pipelined_time_s(good, 0), InputError);
  EXPECT_THROW(chunk_a2a_time_s(good, -1), InputError);
  EXPECT_THROW(regime_at(good, 0), InputError);
}

}  // namespace
}  // namespace moesim::search
