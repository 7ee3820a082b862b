#include "sim/search/online_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "sim/core/error.h"

namespace moesim::search {
namespace {

// Best n grows by one every 1000 tokens from 2 and saturates at 8: non-decreasing in B.
int n_star(std::int64_t tokens) {
  return static_cast<int>(std::min<std::int64_t>(8, 2 + tokens / 1000));
}

// Strictly U-shaped in n with its bottom at n_star(B).
double u_cost(std::int64_t tokens, int n) {
  const double d = n - n_star(tokens);
  return 1.0 + d * d;
}

struct Expected {
  std::int64_t lo, hi;
  int n;
};

void expect_ranges(const OnlineGranularitySearch& s, const std::vector<Expected>& want) {
  const std::vector<TokenRange> got = s.ranges();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].lo, want[i].lo) << i;
    EXPECT_EQ(got[i].hi, want[i].hi) << i;
    EXPECT_EQ(got[i].choice.n, want[i].n) << i;
    EXPECT_EQ(got[i].choice.strategy, 0) << i;
  }
}

TEST(OnlineGranularitySearch, HandTrace) {
  OnlineGranularitySearch s;  // n in [2, 8]
  std::vector<int> tried;
  const auto trial_for = [&](std::int64_t b) {
    return [&tried, b](int n) {
      tried.push_back(n);
      return u_cost(b, n);
    };
  };

  // B = 3500, n* = 5, no ranges: bracket [2, 8]; times 10, 5, 2, 1, 2 -> stops at 6, picks 5.
  tried.clear();
  EXPECT_EQ(s.choose(3500, trial_for(3500)), 5);
  EXPECT_EQ(tried, (std::vector<int>{2, 3, 4, 5, 6}));
  EXPECT_EQ(s.last_call_trials(), 5);
  expect_ranges(s, {{3500, 3500, 5}});

  // B = 3700, n* = 5: bracket [5 (left), 8]; 5 then 6 is worse -> 5; widen [3500, 3700].
  tried.clear();
  EXPECT_EQ(s.choose(3700, trial_for(3700)), 5);
  EXPECT_EQ(tried, (std::vector<int>{5, 6}));
  expect_ranges(s, {{3500, 3700, 5}});

  // B = 3600 lies in the range: no trial, range hit; again: cache hit.
  tried.clear();
  EXPECT_EQ(s.choose(3600, trial_for(3600)), 5);
  EXPECT_EQ(s.range_hits(), 1);
  EXPECT_EQ(s.cache_hits(), 0);
  EXPECT_EQ(s.choose(3600, trial_for(3600)), 5);
  EXPECT_EQ(s.cache_hits(), 1);
  EXPECT_EQ(s.choose(3500, trial_for(3500)), 5);
  EXPECT_EQ(s.cache_hits(), 2);
  EXPECT_TRUE(tried.empty());
  EXPECT_EQ(s.last_call_trials(), 0);

  // B = 1200, n* = 3: bracket [2 (n_min), 5 (right)]; 2, 3, 4 -> 3; new range.
  tried.clear();
  EXPECT_EQ(s.choose(1200, trial_for(1200)), 3);
  EXPECT_EQ(tried, (std::vector<int>{2, 3, 4}));

  // B = 6000, n* = 8: bracket [5, 8]; improves to the upper end without a stopping trial.
  tried.clear();
  EXPECT_EQ(s.choose(6000, trial_for(6000)), 8);
  EXPECT_EQ(tried, (std::vector<int>{5, 6, 7, 8}));

  // B = 7000: bracket [8, 8] -> forced, no trial; the left range [6000, 6000] widens to 7000.
  tried.clear();
  EXPECT_EQ(s.choose(7000, trial_for(7000)), 8);
  EXPECT_TRUE(tried.empty());

  // B = 2500, n* = 4: bracket [3, 5]; 3, 4, 5 -> 4; new range between.
  tried.clear();
  EXPECT_EQ(s.choose(2500, trial_for(2500)), 4);
  EXPECT_EQ(tried, (std::vector<int>{3, 4, 5}));

  // B = 1100, n* = 3: bracket [2, 3]; 2 then 3 improves -> 3 = right neighbour's n: widen it down.
  tried.clear();
  EXPECT_EQ(s.choose(1100, trial_for(1100)), 3);
  EXPECT_EQ(tried, (std::vector<int>{2, 3}));

  expect_ranges(s, {{1100, 1200, 3}, {2500, 2500, 4}, {3500, 3700, 5}, {6000, 7000, 8}});
  EXPECT_EQ(s.total_trials(), 5 + 2 + 3 + 4 + 0 + 3 + 2);
  EXPECT_EQ(s.searches(), 7);
  EXPECT_EQ(s.cache().size(), 8u);
  s.check_invariants();

  // Every trial is recorded with its B.
  const GranularityTrial& first = s.trials().front();
  EXPECT_EQ(first.tokens, 3500);
  EXPECT_EQ(first.n, 2);
  EXPECT_EQ(first.time, 10.0);
}

TEST(OnlineGranularitySearch, TiesStopTheWalkAndKeepTheSmallerN) {
  OnlineGranularitySearch s(2, 8);
  // Flat cost: 3 is not strictly better than 2, so the walk stops after two trials.
  EXPECT_EQ(s.choose(100, [](int) { return 1.0; }), 2);
  EXPECT_EQ(s.last_call_trials(), 2);
}

TEST(OnlineGranularitySearch, CustomBoundsAndDegenerateBracket) {
  OnlineGranularitySearch s(4, 4);
  EXPECT_EQ(s.choose(10, [](int) -> double { throw std::runtime_error("no trial expected"); }), 4);
  EXPECT_EQ(s.total_trials(), 0);
  EXPECT_EQ(s.n_min(), 4);
  EXPECT_EQ(s.n_max(), 4);
}

TEST(OnlineGranularitySearch, FindsTheOptimumWithFewerTrialsThanExhaustive) {
  OnlineGranularitySearch s;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> tokens_dist(1, 9000);
  std::set<std::int64_t> distinct;
  std::int64_t per_call_sum = 0;
  for (int call = 0; call < 500; ++call) {
    const std::int64_t b = tokens_dist(rng);
    const bool is_new = distinct.insert(b).second;
    const std::int64_t hits_before = s.cache_hits();
    const int n = s.choose(b, [b](int k) { return u_cost(b, k); });
    ASSERT_EQ(n, n_star(b)) << "B = " << b;
    if (!is_new) {
      EXPECT_EQ(s.cache_hits(), hits_before + 1);
    }
    per_call_sum += s.last_call_trials();
    s.check_invariants();
  }
  const std::int64_t exhaustive = 7 * static_cast<std::int64_t>(distinct.size());
  EXPECT_LT(s.total_trials(), exhaustive);
  EXPECT_EQ(per_call_sum, s.total_trials());
  EXPECT_EQ(s.cache_hits() + s.range_hits() + s.searches(), 500);
  EXPECT_GT(s.range_hits(), 0);
  EXPECT_GT(s.cache_hits(), 0);
  // Under the hypothesis the ranges end up one per n, in order.
  for (const TokenRange& r : s.ranges()) {
    EXPECT_EQ(n_star(r.lo), r.choice.n);
    EXPECT_EQ(n_star(r.hi), r.choice.n);
  }
}

TEST(OnlineGranularitySearch, InvariantsHoldForArbitraryTrialTimes) {
  // Random times violate the U-shape hypothesis; the answers are then not optimal, but the range
  // structure must stay sound after every call.
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<std::int64_t> tokens_dist(1, 4000);
  std::uniform_real_distribution<double> time_dist(0.0, 1.0);
  OnlineGranularitySearch s(1, 16);
  for (int call = 0; call < 500; ++call) {
    const std::int64_t b = tokens_dist(rng);
    const int n = s.choose(b, [&](int) { return time_dist(rng); });
    ASSERT_GE(n, 1);
    ASSERT_LE(n, 16);
    ASSERT_NO_THROW(s.check_invariants()) << "call " << call;
    ASSERT_EQ(s.choose(b, [](int) -> double { throw std::runtime_error("cached"); }), n);
  }
  EXPECT_GE(s.cache_hits(), 500);  // the explicit repeat of every call, plus repeated draws
}

TEST(OnlineGranularitySearch, ChoosePairTriesEveryStrategyAtEachVisitedN) {
  OnlineGranularitySearch s;
  // B = 1000 -> n* = 3. Strategy penalties {0.5, 0.25, 0.75}: strategy 1 wins at every n.
  const double penalty[] = {0.5, 0.25, 0.75};
  std::vector<std::pair<int, int>> tried;
  const auto trial = [&](std::int64_t b) {
    return [&, b](int n, int st) {
      tried.emplace_back(n, st);
      return u_cost(b, n) + penalty[st];
    };
  };
  // Walk 2, 3, 4 (4 is worse) with three strategies each.
  const GranularityChoice c = s.choose_pair(1000, trial(1000), 3);
  EXPECT_EQ(c, (GranularityChoice{3, 1}));
  EXPECT_EQ(s.last_call_trials(), 9);
  const std::vector<std::pair<int, int>> want = {{2, 0}, {2, 1}, {2, 2}, {3, 0}, {3, 1},
                                                 {3, 2}, {4, 0}, {4, 1}, {4, 2}};
  EXPECT_EQ(tried, want);
  EXPECT_EQ(s.trials()[4].strategy, 1);

  // B = 1900 (n* = 3): bracket [3 (left range), 8], walk 3, 4 -> (3, 1), the range widens.
  EXPECT_EQ(s.choose_pair(1900, trial(1900), 3), (GranularityChoice{3, 1}));
  EXPECT_EQ(s.ranges().size(), 1u);
  // B = 500 (n* = 2) with a strategy that now ties: bracket [2, 3]; ties go to index 0.
  tried.clear();
  const GranularityChoice tie = s.choose_pair(
      500,
      [&](int n, int) {
        tried.emplace_back(n, 0);
        return u_cost(500, n);
      },
      3);
  EXPECT_EQ(tie, (GranularityChoice{2, 0}));
  EXPECT_EQ(tried.size(), 6u);  // n = 2 and n = 3, three strategies each
  ASSERT_EQ(s.ranges().size(), 2u);
  s.check_invariants();

  // Same n, different strategy: a new range next to the (3, 1) range, not a widening.
  const GranularityChoice other = s.choose_pair(
      2500, [](int n, int st) { return u_cost(1000, n) + (st == 2 ? 0.0 : 1.0); }, 3);
  EXPECT_EQ(other, (GranularityChoice{3, 2}));
  const std::vector<TokenRange> r = s.ranges();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].lo, 1000);
  EXPECT_EQ(r[1].hi, 1900);
  EXPECT_EQ(r[2].lo, 2500);
  EXPECT_EQ(r[2].choice, (GranularityChoice{3, 2}));
  s.check_invariants();
}

TEST(OnlineGranularitySearch, ChoosePairInvariantsUnderRandomTimes) {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<std::int64_t> tokens_dist(1, 3000);
  std::uniform_real_distribution<double> time_dist(0.0, 1.0);
  OnlineGranularitySearch s;
  for (int call = 0; call < 500; ++call) {
    const std::int64_t b = tokens_dist(rng);
    const GranularityChoice c = s.choose_pair(
        b, [&](int, int) { return time_dist(rng); }, 4);
    ASSERT_GE(c.strategy, 0);
    ASSERT_LT(c.strategy, 4);
    ASSERT_NO_THROW(s.check_invariants()) << "call " << call;
  }
}

TEST(OnlineGranularitySearch, InvalidInputs) {
  EXPECT_THROW(OnlineGranularitySearch(0, 8), InputError);
  EXPECT_THROW(OnlineGranularitySearch(5, 4), InputError);
  OnlineGranularitySearch s;
  const auto ok = [](int) { return 1.0; };
  EXPECT_THROW(s.choose(0, ok), InputError);
  EXPECT_THROW(s.choose(-5, ok), InputError);
  EXPECT_THROW(s.choose(10, OnlineGranularitySearch::Trial{}), InputError);
  try {
    s.choose(10, [](int) { return std::numeric_limits<double>::quiet_NaN(); });
    FAIL() << "NaN trial accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("n = 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.choose(10, [](int) { return -1.0; }), InputError);
  EXPECT_EQ(s.ranges().size(), 0u);  // a failed call inserts nothing
  EXPECT_EQ(s.choose(10, ok), 2);
  // The search is fixed to one strategy now.
  EXPECT_THROW(s.choose_pair(
                   20, [](int, int) { return 1.0; }, 2),
               InputError);
  EXPECT_THROW(s.choose_pair(
                   20, [](int, int) { return 1.0; }, 0),
               InputError);
  s.check_invariants();
}

}  // namespace
}  // namespace moesim::search
