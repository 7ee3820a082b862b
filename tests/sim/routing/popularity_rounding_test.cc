// PopularityRounding (sim/routing/routing.h): the water-filling and remainders computed once, each
// rotation's demand in O(E), against the direct largest-remainder rounding written out here (one
// sort per rotation), on random popularities with many ties, for every rotation.
#include "sim/routing/routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace moesim {
namespace {

// The rounding as one function: water-fill to at most B, floor, then one per expert by falling
// remainder, ties by (e - rotation) mod E, while choices are left.
std::vector<std::int64_t> direct(const std::vector<double>& p, int k, std::int64_t B, int rotation) {
  const std::size_t E = p.size();
  std::vector<std::size_t> order(E);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
  double rest = 0;
  for (double v : p) rest += v;
  const double total = static_cast<double>(k) * static_cast<double>(B);
  std::size_t capped = 0;
  double scale = total / rest;
  while (capped < E && p[order[capped]] * scale > static_cast<double>(B)) {
    rest -= p[order[capped]];
    ++capped;
    scale = (total - static_cast<double>(capped) * static_cast<double>(B)) / rest;
  }
  std::vector<double> x(E);
  for (std::size_t i = 0; i < E; ++i) x[order[i]] = i < capped ? static_cast<double>(B) : p[order[i]] * scale;
  std::vector<std::int64_t> out(E);
  std::int64_t left = static_cast<std::int64_t>(k) * B;
  for (std::size_t e = 0; e < E; ++e) {
    out[e] = std::min(B, static_cast<std::int64_t>(std::floor(x[e] + 1e-9)));
    left -= out[e];
  }
  const std::size_t rot = static_cast<std::size_t>(rotation) % E;
  std::vector<std::size_t> by(E);
  std::iota(by.begin(), by.end(), std::size_t{0});
  std::sort(by.begin(), by.end(), [&](std::size_t a, std::size_t b) {
    const double ra = x[a] - static_cast<double>(out[a]), rb = x[b] - static_cast<double>(out[b]);
    if (ra != rb) return ra > rb;
    return (a + E - rot) % E < (b + E - rot) % E;
  });
  while (left > 0)
    for (std::size_t e : by)
      if (left > 0 && out[e] < B && p[e] > 0) ++out[e], --left;
  return out;
}

TEST(PopularityRounding, EveryRotationEqualsTheDirectRounding) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const int E = std::uniform_int_distribution<int>(2, 70)(rng);
    const int k = std::uniform_int_distribution<int>(1, std::min(E, 4))(rng);
    const std::int64_t B = std::uniform_int_distribution<std::int64_t>(1, 300)(rng);
    // Few distinct values (ties everywhere), some zeros, sometimes one hot expert above B.
    std::vector<double> p(static_cast<std::size_t>(E));
    for (double& v : p) v = std::uniform_int_distribution<int>(0, 3)(rng);
    if (trial % 3 == 0) p[static_cast<std::size_t>(trial) % p.size()] = 1000;
    if (std::count_if(p.begin(), p.end(), [](double v) { return v > 0; }) < k) continue;
    const PopularityRounding rounding(p, k, B);
    for (int rotation = 0; rotation < E + 3; ++rotation) {
      const std::vector<std::int64_t> got = rounding.demand(rotation);
      EXPECT_EQ(got, direct(p, k, B, rotation)) << "trial " << trial << ", rotation " << rotation;
      EXPECT_EQ(got, demand_from_popularity(p, k, B, rotation));
      EXPECT_EQ(std::accumulate(got.begin(), got.end(), std::int64_t{0}), k * B);
    }
  }
}

}  // namespace
}  // namespace moesim
