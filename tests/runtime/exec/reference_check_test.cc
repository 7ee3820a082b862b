// judge_routing: how the reference check tells a device's top-k choice that only breaks a near-tie
// differently from a wrong one.
#include "runtime/exec/reference_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace moesim::runtime {
namespace {

// One token per row of probabilities, routed by the reference's own arg-max (top-2 of 4 experts).
reference::Routing own_routing(const std::vector<std::vector<double>>& probs) {
  reference::Routing r;
  r.probs = reference::Matrix(static_cast<std::int64_t>(probs.size()), 4);
  for (std::size_t t = 0; t < probs.size(); ++t) {
    std::vector<int> order{0, 1, 2, 3};
    for (int e = 0; e < 4; ++e) r.probs.at(static_cast<std::int64_t>(t), e) = probs[t][static_cast<std::size_t>(e)];
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs[t][a] > probs[t][b]; });
    r.topk_idx.push_back(order[0]);
    r.topk_idx.push_back(order[1]);
  }
  return r;
}

TEST(JudgeRouting, NearTiesAreAmbiguousAndEverythingElseIsAnError) {
  const double tie = kAmbiguousMargin / 2, gap = kAmbiguousMargin * 10;
  const reference::Routing own = own_routing({
      {0.4, 0.3, 0.2, 0.1},                      // t0: clear choice (0, 1)
      {0.4, 0.3, 0.3 - tie, 0.0 + tie},          // t1: experts 1 and 2 tie for the second place
      {0.35, 0.35 - tie, 0.2, 0.1 + tie},        // t2: experts 0 and 1 tie for the first place
      {0.4, 0.3, 0.3 - gap, 0.0 + gap},          // t3: 1 beats 2 clearly
      {0.4, 0.3, 0.2, 0.1},                      // t4
      {0.4, 0.3, 0.2, 0.1},                      // t5
  });
  const std::vector<std::int32_t> device{
      0, 1,   // t0: the same
      0, 2,   // t1: the other side of the tie: ambiguous
      1, 0,   // t2: the two tied experts swapped: ambiguous
      0, 2,   // t3: a wrong second choice
      0, 0,   // t4: a repeated expert
      0, 4,   // t5: an expert that does not exist
  };
  const RoutingJudgement j = judge_routing(own, device, 6, 2, 4);
  EXPECT_EQ(j.ambiguous, 2);
  EXPECT_EQ(j.errors, 3);
  // The reference follows the device where its choice is valid, else keeps its own.
  EXPECT_EQ(j.forced, (std::vector<int>{0, 1, 0, 2, 1, 0, 0, 2, 0, 1, 0, 1}));
}

// The gate GEMM's rounding: with a bound on each logit's error, a swap of two experts whose
// log-probabilities differ by less than the two bounds is a near-tie, one beyond them an error.
TEST(JudgeRouting, LogitBoundsWidenTheTieToTheGateGemmsRounding) {
  const double close = 1e-4;  // far beyond kAmbiguousMargin
  const reference::Routing own = own_routing({
      {0.4, 0.3, 0.3 - close, close},  // t0: 1 and 2 differ by ~3.3e-4 in log-probability
      {0.4, 0.3, 0.3 - close, close},  // t1: the same, judged with a tighter bound
  });
  reference::Matrix bound(2, 4);
  for (int e = 0; e < 4; ++e) {
    bound.at(0, e) = 2e-4;  // 1 and 2 together: 4e-4 > 3.3e-4
    bound.at(1, e) = 1e-4;  // together 2e-4 < 3.3e-4
  }
  const std::vector<std::int32_t> device{0, 2, 0, 2};
  const RoutingJudgement with_bound = judge_routing(own, device, 2, 2, 4, &bound);
  EXPECT_EQ(with_bound.ambiguous, 1);
  EXPECT_EQ(with_bound.errors, 1);
  const RoutingJudgement without = judge_routing(own, device, 2, 2, 4);
  EXPECT_EQ(without.errors, 2);
}

TEST(LogitErrorBounds, OperandRoundingOfTheMathTypePlusFp32Accumulation) {
  reference::Matrix x(1, 2), gate(2, 2);
  x.at(0, 0) = 1.0;
  x.at(0, 1) = -2.0;
  gate.at(0, 0) = 0.5;
  gate.at(1, 0) = 0.25;
  gate.at(0, 1) = -1.0;
  gate.at(1, 1) = 3.0;
  // sum_k |x_k| |w_ke|: expert 0: 0.5 + 0.5 = 1; expert 1: 1 + 6 = 7.
  const double accumulation = 2 * std::ldexp(1.0, -24);  // M = 2 products
  const reference::Matrix fp32 = logit_error_bounds(x, gate, DType::kFp32);
  EXPECT_DOUBLE_EQ(fp32.at(0, 0), accumulation);
  EXPECT_DOUBLE_EQ(fp32.at(0, 1), 7 * accumulation);
  const reference::Matrix tf32 = logit_error_bounds(x, gate, DType::kTf32);
  EXPECT_DOUBLE_EQ(tf32.at(0, 0), 2 * std::ldexp(1.0, -10) + accumulation);
  EXPECT_DOUBLE_EQ(tf32.at(0, 1), 7 * (2 * std::ldexp(1.0, -10) + accumulation));
  const reference::Matrix bf16 = logit_error_bounds(x, gate, DType::kBf16);
  EXPECT_DOUBLE_EQ(bf16.at(0, 0), 2 * std::ldexp(1.0, -8) + accumulation);
}

}  // namespace
}  // namespace moesim::runtime
