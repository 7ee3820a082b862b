// The incremental max-min solver against a solve of every flow, bit for bit, over random flow sets
// changed by random sequences of additions and removals; and what it solves again.
#include "sim/net/incremental_max_min.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <random>
#include <span>
#include <vector>

namespace moesim {
namespace {

struct LiveFlow {
  std::vector<WeightedLink> links;
  IncrementalMaxMin::Slot slot = 0;
};

// 0 to 5 links (0: unconstrained), distinct, weights 1 to 4 or a fraction (an aggregated class, a
// coflow's load share), drawn from the first `spread` links: few links connect most flows, many
// leave several components.
std::vector<WeightedLink> random_links(std::mt19937& rng, int spread) {
  std::uniform_int_distribution<int> link(0, spread - 1), hops(0, 5), weight(1, 4), coin(0, 3);
  std::vector<WeightedLink> links;
  const int n = std::min(hops(rng), spread);
  while (static_cast<int>(links.size()) < n) {
    const auto l = static_cast<LinkId>(link(rng));
    if (std::any_of(links.begin(), links.end(), [&](const WeightedLink& w) { return w.link == l; })) continue;
    const double w = coin(rng) == 0 ? 1.0 / weight(rng) : static_cast<double>(weight(rng));
    links.push_back({l, w});
  }
  return links;
}

// The live flows in the order they were added, solved all at once.
std::vector<double> global_rates(const std::vector<double>& caps, const std::vector<LiveFlow>& live) {
  MaxMinSolver solver(caps);
  std::vector<std::span<const WeightedLink>> spans;
  for (const LiveFlow& f : live) spans.emplace_back(f.links);
  return solver.solve(spans);
}

TEST(IncrementalMaxMin, RatesEqualAGlobalSolveBitForBit) {
  std::mt19937 rng(2026);
  // 12 and 60 links: the scan; 900: the heap (more than 256 links in use).
  for (int num_links : {12, 60, 900}) {
    std::uniform_int_distribution<int> cap(1, 50);
    std::vector<double> caps(static_cast<std::size_t>(num_links));
    for (double& c : caps) c = 10.0 * cap(rng);  // multiples of 10: levels tie
    for (int trial = 0; trial < 8; ++trial) {
      IncrementalMaxMin inc(caps);
      std::list<LiveFlow> storage;  // stable addresses: the solver keeps the links by reference
      std::vector<LiveFlow> live;   // copies, in the order added
      std::uniform_int_distribution<int> burst(1, 6);
      for (int event = 0; event < 60; ++event) {
        const int adds = burst(rng), removes = live.empty() ? 0 : std::uniform_int_distribution<int>(0, 4)(rng);
        for (int k = 0; k < removes && !live.empty(); ++k) {
          const auto at = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
          inc.remove(live[at].slot);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
        }
        for (int k = 0; k < adds; ++k) {
          const int spread = num_links > 100 ? num_links : std::max(2, num_links / (1 + trial % 3));
          LiveFlow& f = storage.emplace_back(LiveFlow{random_links(rng, spread), 0});
          f.slot = inc.add(f.links);
          live.push_back(f);
        }
        inc.resolve();
        const std::vector<double> want = global_rates(caps, live);
        for (std::size_t i = 0; i < live.size(); ++i)
          ASSERT_EQ(inc.rate(live[i].slot), want[i]) << num_links << " links, trial " << trial << ", event " << event << ", flow " << i;
      }
    }
  }
}

TEST(IncrementalMaxMin, SolvesOnlyTheComponentsAChangeTouches) {
  // Links 0-1 carry flows a and b (one component), link 2 carries c, link 3 d (two more).
  const std::vector<double> caps = {10, 30, 8, 5};
  const std::vector<WeightedLink> a = {{0, 1}, {1, 1}}, b = {{1, 1}}, c = {{2, 1}}, d = {{3, 2}};
  IncrementalMaxMin inc(caps);
  const auto sa = inc.add(a), sb = inc.add(b), sc = inc.add(c), sd = inc.add(d);
  inc.resolve();
  EXPECT_EQ(inc.last_solved(), 4u);
  // Link 0: a alone up to 10; link 1: a and b share 30, a frozen at 10, b gets 20. c: 8. d: 5/2.
  EXPECT_EQ(inc.rate(sa), 10.0);
  EXPECT_EQ(inc.rate(sb), 20.0);
  EXPECT_EQ(inc.rate(sc), 8.0);
  EXPECT_EQ(inc.rate(sd), 2.5);
  // A second flow on link 2 re-solves that link's component only: c and e share 8.
  const std::vector<WeightedLink> e = {{2, 1}};
  const auto se = inc.add(e);
  inc.resolve();
  EXPECT_EQ(inc.last_solved(), 2u);
  EXPECT_EQ(inc.rate(sc), 4.0);
  EXPECT_EQ(inc.rate(se), 4.0);
  EXPECT_EQ(inc.rate(sa), 10.0);
  // a leaves: b alone on link 1 gets its 30; c, d and e are not solved again.
  inc.remove(sa);
  inc.resolve();
  EXPECT_EQ(inc.last_solved(), 1u);
  EXPECT_EQ(inc.rate(sb), 30.0);
  EXPECT_EQ(inc.rate(sd), 2.5);
  // Nothing changed: nothing solved. A flow over no link is unconstrained.
  inc.resolve();
  EXPECT_EQ(inc.last_solved(), 0u);
  const auto free_flow = inc.add({});
  inc.resolve();
  EXPECT_EQ(inc.rate(free_flow), kUnlimitedRate);
  EXPECT_EQ(inc.size(), 5u);
}

}  // namespace
}  // namespace moesim
