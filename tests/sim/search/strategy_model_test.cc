#include "sim/search/strategy_model.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "sim/core/error.h"

namespace moesim::search {
namespace {

TEST(StrategyModel, QTableIsMPipeMoETableII) {
  const StrategyRow want[] = {{ReuseStrategy::kNone, {2, 2, 0}, {4, 2, 0}},
                              {ReuseStrategy::kS1, {2, 2, 5}, {4, 2, 5}},
                              {ReuseStrategy::kS2, {2, 2, 4}, {4, 3, 4}},
                              {ReuseStrategy::kS3, {2, 2, 1}, {5, 2, 1}},
                              {ReuseStrategy::kS4, {2, 2, 0}, {5, 3, 0}}};
  for (int i = 0; i < kNumReuseStrategies; ++i) {
    EXPECT_EQ(kStrategyTable[i].strategy, want[i].strategy) << i;
    EXPECT_EQ(kStrategyTable[i].forward, want[i].forward) << i;
    EXPECT_EQ(kStrategyTable[i].backward, want[i].backward) << i;
  }
  EXPECT_EQ(strategy_name(ReuseStrategy::kNone), "none");
  EXPECT_EQ(strategy_name(ReuseStrategy::kS3), "s3");
}

// b = 1024, M = 1024, H = 4096: v_comp = 2^32, v_comm = v_mem = 2^20.
// W_comp = 2^44, W_comm = 2^28, W_mem = 2^27; every factor 1 except mu_all = eta_all = 0.5.
StrategyModelParams hand_config() {
  StrategyModelParams p;
  p.tokens_per_chunk = 1024;
  p.model_dim = 1024;
  p.hidden_dim = 4096;
  p.w_comp = 0x1p44;
  p.w_comm = 0x1p28;
  p.w_mem = 0x1p27;
  p.factors.mu_all = 0.5;
  p.factors.eta_all = 0.5;
  return p;
}

TEST(StrategyModel, HandComputedCosts) {
  // One GEMM 2^32/2^44 = 2^-12 (sigma = 1 for all).
  // One A2A: none/S4 (mu = 1) 2^20/2^28 = 2^-8; S1-S3 (mu_all = 0.5) 2^-7.
  // One memcpy unit (eta_all = 0.5): 2^20/(0.5*2^27) = 2^-6.
  // none: fwd max(2*2^-12, 2*2^-8, 0) = 2^-7; bwd max(4*2^-12, 2*2^-8, 0) = 2^-7; total 2^-6.
  // S1:   fwd max(2^-11, 2^-6, 5*2^-6) = 5/64; bwd the same; total 10/64.
  // S2:   fwd max(2^-11, 2^-6, 4*2^-6) = 4/64; bwd max(2^-10, 3*2^-7, 4/64) = 4/64; total 8/64.
  // S3:   fwd max(2^-11, 2^-6, 2^-6) = 1/64; bwd max(5*2^-12, 2^-6, 2^-6) = 1/64; total 2/64.
  // S4:   fwd 2^-7; bwd max(5*2^-12, 3*2^-8) = 3/256; total 5/256.
  const StrategyCosts c = strategy_costs(hand_config());
  EXPECT_DOUBLE_EQ(c.forward_s[0], 1.0 / 128);
  EXPECT_DOUBLE_EQ(c.backward_s[0], 1.0 / 128);
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kNone), 1.0 / 64);
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kS1), 10.0 / 64);
  EXPECT_DOUBLE_EQ(c.forward_s[2], 4.0 / 64);
  EXPECT_DOUBLE_EQ(c.backward_s[2], 4.0 / 64);
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kS2), 8.0 / 64);
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kS3), 2.0 / 64);
  EXPECT_DOUBLE_EQ(c.backward_s[4], 3.0 / 256);
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kS4), 5.0 / 256);
  EXPECT_EQ(c.best, ReuseStrategy::kNone);
  EXPECT_EQ(c.best_reuse, ReuseStrategy::kS4);
  // Direct use of one direction's C.
  EXPECT_DOUBLE_EQ(direction_cost_s(hand_config(), ReuseStrategy::kS1, StrategyQ{0, 0, 1}),
                   1.0 / 64);
}

TEST(StrategyModel, NoneNeverLoses) {
  StrategyModelParams p = hand_config();
  p.factors = a100_interference_prior();
  for (double w_mem : {1e3, 1e6, 1e9, 1e12}) {
    p.w_mem = w_mem;
    const StrategyCosts c = strategy_costs(p);
    EXPECT_EQ(c.best, ReuseStrategy::kNone);
    for (int i = 1; i < kNumReuseStrategies; ++i) EXPECT_LE(c.total_s[0], c.total_s[i]);
  }
}

TEST(StrategyModel, SlowPcieMakesS4Win) {
  StrategyModelParams p = hand_config();
  p.factors = a100_interference_prior();
  p.w_mem = 1e3;  // a crawling host link: every strategy that copies loses
  const StrategyCosts c = strategy_costs(p);
  EXPECT_EQ(c.best_reuse, ReuseStrategy::kS4);
  EXPECT_LT(c.total(ReuseStrategy::kS4), c.total(ReuseStrategy::kS3));
}

TEST(StrategyModel, SlowNetworkFastComputeMakesS3BeatS2) {
  StrategyModelParams p = hand_config();
  p.factors = a100_interference_prior();
  p.w_comp = 1e18;  // recompute is free
  p.w_comm = 1e3;   // every all-to-all is expensive
  p.w_mem = 1e12;
  const StrategyCosts c = strategy_costs(p);
  EXPECT_LT(c.total(ReuseStrategy::kS3), c.total(ReuseStrategy::kS2));
  EXPECT_LT(c.total(ReuseStrategy::kS3), c.total(ReuseStrategy::kS4));
  // S1 and S3 both pay two A2As per direction under the same factors: a tie that goes to S1.
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kS1), c.total(ReuseStrategy::kS3));
  EXPECT_EQ(c.best_reuse, ReuseStrategy::kS1);
}

TEST(StrategyModel, A100FactorsSelectedPerStrategy) {
  // Communication-bound config: none/S4 A2As run at mu = 0.72, S1-S3 at mu_all = 0.71.
  StrategyModelParams p = hand_config();
  p.factors = a100_interference_prior();
  p.w_comp = 1e30;
  p.w_mem = 1e30;
  const double a2a = 1024.0 * 1024.0 / 0x1p28;
  const StrategyCosts c = strategy_costs(p);
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kNone), 2 * a2a / 0.72 + 2 * a2a / 0.72);
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kS1), 2 * a2a / 0.71 + 2 * a2a / 0.71);
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kS2), 2 * a2a / 0.71 + 3 * a2a / 0.71);
  EXPECT_DOUBLE_EQ(c.total(ReuseStrategy::kS4), 2 * a2a / 0.72 + 3 * a2a / 0.72);
}

TEST(StrategyModel, HardwareThroughputs) {
  const Throughputs t = hardware_throughputs(2e14, 4e10, 2e10, 4.0);
  EXPECT_DOUBLE_EQ(t.w_comp, 1e14);
  EXPECT_DOUBLE_EQ(t.w_comm, 1e10);
  EXPECT_DOUBLE_EQ(t.w_mem, 5e9);
  EXPECT_THROW(hardware_throughputs(0.0, 1.0, 1.0, 4.0), InputError);
  EXPECT_THROW(hardware_throughputs(1.0, 1.0, 1.0, -2.0), InputError);
}

TEST(StrategyModel, InvalidInputsNameTheField) {
  const auto expect_named = [](StrategyModelParams p, const std::string& name) {
    try {
      strategy_costs(p);
      FAIL() << name << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  StrategyModelParams p = hand_config();
  p.tokens_per_chunk = 0;
  expect_named(p, "tokens_per_chunk");
  p = hand_config();
  p.hidden_dim = -1;
  expect_named(p, "hidden_dim");
  p = hand_config();
  p.w_comm = std::numeric_limits<double>::infinity();
  expect_named(p, "w_comm");
  p = hand_config();
  p.w_mem = 0.0;
  expect_named(p, "w_mem");
  p = hand_config();
  p.factors.eta_all = std::numeric_limits<double>::quiet_NaN();
  expect_named(p, "eta_all");
  p = hand_config();
  p.factors.sigma_comp_with_comm = -0.5;
  expect_named(p, "sigma_comp_with_comm");
  EXPECT_THROW(direction_cost_s(hand_config(), ReuseStrategy::kS1, StrategyQ{-1, 0, 0}),
               InputError);
}

}  // namespace
}  // namespace moesim::search
