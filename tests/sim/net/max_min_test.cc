// The max-min solver on random problems: against a textbook progressive filling, and its two
// fillings (a scan while few links are in use, a heap when many are) against each other, bit for bit.
#include "sim/net/max_min.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <vector>

namespace moesim {
namespace {

using Flows = std::vector<std::vector<WeightedLink>>;

std::vector<double> solve(const std::vector<double>& caps, const Flows& flows) {
  MaxMinSolver s(caps);
  std::vector<std::span<const WeightedLink>> spans(flows.begin(), flows.end());
  return s.solve(spans);
}

// Textbook progressive filling: every round, the level of each link over its unfrozen flows'
// weights, the lowest one freezes its flows.
std::vector<double> reference(const std::vector<double>& caps, const Flows& flows) {
  std::vector<double> rate(flows.size(), kUnlimitedRate);
  std::vector<bool> frozen(flows.size(), false);
  for (;;) {
    std::vector<double> load(caps.size(), 0.0), weight(caps.size(), 0.0);
    for (std::size_t f = 0; f < flows.size(); ++f)
      for (const WeightedLink& wl : flows[f]) (frozen[f] ? load : weight)[wl.link] += frozen[f] ? wl.weight * rate[f] : wl.weight;
    int best = -1;
    double level = 0;
    for (std::size_t l = 0; l < caps.size(); ++l) {
      if (weight[l] <= 1e-12) continue;
      const double v = std::max(0.0, caps[l] - load[l]) / weight[l];
      if (best < 0 || v < level) best = static_cast<int>(l), level = v;
    }
    if (best < 0) return rate;
    for (std::size_t f = 0; f < flows.size(); ++f) {
      if (frozen[f]) continue;
      for (const WeightedLink& wl : flows[f]) {
        if (wl.link == static_cast<LinkId>(best)) {
          frozen[f] = true;
          rate[f] = level;
          break;
        }
      }
    }
  }
}

// `num_flows` flows over `num_links` links, each crossing 1 to 6 distinct links (at most all of them)
// with weights 1 to 4.
Flows random_flows(std::mt19937& rng, int num_links, int num_flows) {
  Flows flows(static_cast<std::size_t>(num_flows));
  std::uniform_int_distribution<int> link(0, num_links - 1), hops(1, 6), weight(1, 4);
  for (auto& f : flows) {
    const int n = std::min(hops(rng), num_links);
    while (static_cast<int>(f.size()) < n) {
      const auto l = static_cast<LinkId>(link(rng));
      if (std::none_of(f.begin(), f.end(), [&](const WeightedLink& w) { return w.link == l; }))
        f.push_back({l, static_cast<double>(weight(rng))});
    }
  }
  return flows;
}

std::vector<double> random_caps(std::mt19937& rng, int num_links) {
  std::uniform_int_distribution<int> cap(1, 50);
  std::vector<double> caps(static_cast<std::size_t>(num_links));
  for (double& c : caps) c = 10.0 * cap(rng);  // multiples of 10: ties between levels happen
  return caps;
}

TEST(MaxMinSolver, MatchesTextbookProgressiveFillingWithFewAndManyLinks) {
  std::mt19937 rng(7);
  for (int num_links : {5, 40, 200, 600}) {  // the last one uses more links than the scan takes
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<double> caps = random_caps(rng, num_links);
      const Flows flows = random_flows(rng, num_links, num_links);
      const std::vector<double> got = solve(caps, flows);
      const std::vector<double> want = reference(caps, flows);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t f = 0; f < got.size(); ++f)
        EXPECT_NEAR(got[f], want[f], 1e-9 * want[f]) << num_links << " links, trial " << trial << ", flow " << f;
    }
  }
}

// The same problem solved once with few links in use (scan) and once with 400 extra links, each
// carrying one flow of its own on a link so wide that it saturates after every other (heap): the
// problem's flows go through the same events with the same arithmetic, so their rates are equal
// bit for bit.
TEST(MaxMinSolver, ScanAndHeapGiveIdenticalRates) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const int num_links = 60;
    std::vector<double> caps = random_caps(rng, num_links);
    Flows flows = random_flows(rng, num_links, 80);
    const std::vector<double> few = solve(caps, flows);
    for (int extra = 0; extra < 400; ++extra) {
      caps.push_back(1e12);
      flows.push_back({{static_cast<LinkId>(num_links + extra), 1.0}});
    }
    const std::vector<double> many = solve(caps, flows);
    for (std::size_t f = 0; f < few.size(); ++f) EXPECT_EQ(few[f], many[f]) << "trial " << trial << ", flow " << f;
    for (std::size_t f = few.size(); f < many.size(); ++f) EXPECT_EQ(many[f], 1e12);
  }
}

TEST(MaxMinSolver, ReusedAcrossCallsLeavesNoState) {
  std::mt19937 rng(3);
  const std::vector<double> caps = random_caps(rng, 30);
  MaxMinSolver s(caps);
  for (int trial = 0; trial < 10; ++trial) {
    const Flows flows = random_flows(rng, 30, 25);
    std::vector<std::span<const WeightedLink>> spans(flows.begin(), flows.end());
    EXPECT_EQ(s.solve(spans), solve(caps, flows)) << trial;
  }
}

// The heap path where events close many links at once (every flow also crosses one shared link,
// and each a private link of its own), with weights that do not add up exactly in binary: the
// solver rebuilds its heap without the closed links and stops once every flow is frozen; it
// matches the textbook filling, ends, and a solver reused for the next problem (heap, then scan)
// answers as a fresh one.
TEST(MaxMinSolver, HeapPathWithClosingLinksAndInexactWeights) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> weight(0.3, 3.7);
  for (int trial = 0; trial < 10; ++trial) {
    // Flow f crosses the shared link 0, its narrow link 1 + f and its wide link 1 + n + f: as the
    // narrow links saturate one by one, each closes its flow's wide link, still in the heap.
    const int shared = 0, flows_n = 400;
    std::vector<double> caps = random_caps(rng, 1 + 2 * flows_n);
    caps[shared] = 1e5;
    for (int f = 0; f < flows_n; ++f) caps[static_cast<std::size_t>(1 + flows_n + f)] = 1e9;
    Flows flows(static_cast<std::size_t>(flows_n));
    for (int f = 0; f < flows_n; ++f)
      flows[static_cast<std::size_t>(f)] = {{shared, weight(rng)},
                                            {static_cast<LinkId>(1 + f), weight(rng)},
                                            {static_cast<LinkId>(1 + flows_n + f), weight(rng)}};
    const std::vector<double> caps_copy = caps;
    MaxMinSolver s(caps_copy);
    std::vector<std::span<const WeightedLink>> spans(flows.begin(), flows.end());
    const std::vector<double> got = s.solve(spans);
    const std::vector<double> want = reference(caps, flows);
    for (std::size_t f = 0; f < got.size(); ++f) EXPECT_NEAR(got[f], want[f], 1e-9 * want[f]) << trial << " " << f;
    const Flows small = random_flows(rng, 30, 25);
    std::vector<std::span<const WeightedLink>> small_spans(small.begin(), small.end());
    EXPECT_EQ(s.solve(small_spans), solve(caps, small)) << trial;
    EXPECT_EQ(s.solve(spans), got) << trial;
  }
}

}  // namespace
}  // namespace moesim
