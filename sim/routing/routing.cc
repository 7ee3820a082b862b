#include "sim/routing/routing.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

#include "sim/core/checked_math.h"
#include "sim/core/input_file.h"

namespace moesim {

RoutingPlan::RoutingPlan(const RoutingShape& shape, std::vector<std::int64_t> demand, std::string label)
    : shape_(shape), demand_(std::move(demand)) {
  const int N = shape_.ranks, E = shape_.experts, n = shape_.chunks;
  MOESIM_CHECK(N >= 1 && E >= N && E % N == 0 && n >= 1, "routing shape out of range");
  MOESIM_CHECK(demand_.size() == static_cast<std::size_t>(N) * static_cast<std::size_t>(E),
               "routing demand is not N x E");
  const int local = E / N;

  const auto NN = static_cast<std::size_t>(N) * static_cast<std::size_t>(N);
  std::vector<std::vector<std::int64_t>> pairs(static_cast<std::size_t>(n), std::vector<std::int64_t>(NN, 0));
  sent_.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(N), 0);
  received_.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(N), 0);
  for (int s = 0; s < N; ++s) {
    for (int d = 0; d < N; ++d) {
      for (int e = d * local; e < (d + 1) * local; ++e) {
        const std::int64_t rows = kept(s, e);
        if (rows == 0) continue;
        for (int c = 0; c < n; ++c) {
          const std::int64_t share = chunk_share(rows, c, n);
          pairs[static_cast<std::size_t>(c)][static_cast<std::size_t>(s) * static_cast<std::size_t>(N) +
                                              static_cast<std::size_t>(d)] += share;
          sent_[static_cast<std::size_t>(c) * static_cast<std::size_t>(N) + static_cast<std::size_t>(s)] += share;
          received_[static_cast<std::size_t>(c) * static_cast<std::size_t>(N) + static_cast<std::size_t>(d)] += share;
        }
      }
    }
  }

  for (auto& chunk : pairs) pairs_.push_back(std::make_shared<const std::vector<std::int64_t>>(std::move(chunk)));

  stats_.routing = std::move(label);
  std::vector<std::int64_t> load(static_cast<std::size_t>(E), 0), kept_load(static_cast<std::size_t>(E), 0);
  for (int s = 0; s < N; ++s)
    for (int e = 0; e < E; ++e) {
      load[static_cast<std::size_t>(e)] += demand_[index(s, e)];
      kept_load[static_cast<std::size_t>(e)] += kept(s, e);
    }
  const std::int64_t routed = std::accumulate(load.begin(), load.end(), std::int64_t{0});
  const std::int64_t kept_total = std::accumulate(kept_load.begin(), kept_load.end(), std::int64_t{0});
  stats_.routed = routed;
  stats_.dropped = routed - kept_total;
  const auto ratio = [](std::int64_t max, std::int64_t total, int count) {
    return total > 0 ? static_cast<double>(max) * count / static_cast<double>(total) : 1.0;
  };
  const auto busiest = std::max_element(load.begin(), load.end());
  stats_.busiest_expert = static_cast<int>(busiest - load.begin());
  stats_.expert_imbalance = ratio(*busiest, routed, E);
  stats_.kept_expert_imbalance =
      ratio(*std::max_element(kept_load.begin(), kept_load.end()), kept_total, E);
  std::vector<std::int64_t> rank_rows(static_cast<std::size_t>(N), 0);
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < n; ++c) rank_rows[static_cast<std::size_t>(r)] += received_rows(r, c);
  const auto busiest_rank = std::max_element(rank_rows.begin(), rank_rows.end());
  stats_.busiest_rank = static_cast<int>(busiest_rank - rank_rows.begin());
  stats_.rank_imbalance = ratio(*busiest_rank, kept_total, N);
}

std::size_t RoutingPlan::index(int s, int e) const {
  return static_cast<std::size_t>(s) * static_cast<std::size_t>(shape_.experts) + static_cast<std::size_t>(e);
}

std::int64_t RoutingPlan::pair_rows(int c, int s, int d) const {
  return (*pairs_.at(static_cast<std::size_t>(c)))[static_cast<std::size_t>(s) * static_cast<std::size_t>(shape_.ranks) +
                                                static_cast<std::size_t>(d)];
}

std::int64_t RoutingPlan::sent_rows(int rank, int c) const {
  return sent_.at(static_cast<std::size_t>(c) * static_cast<std::size_t>(shape_.ranks) + static_cast<std::size_t>(rank));
}

std::int64_t RoutingPlan::received_rows(int rank, int c) const {
  return received_.at(static_cast<std::size_t>(c) * static_cast<std::size_t>(shape_.ranks) +
                      static_cast<std::size_t>(rank));
}

std::int64_t chunk_share(std::int64_t rows, int c, int n) {
  return rows / n + (c < rows % n ? 1 : 0);
}

PopularityRounding::PopularityRounding(const std::vector<double>& popularity, int top_k, std::int64_t tokens)
    : popularity_(popularity), tokens_(tokens) {
  const std::size_t E = popularity.size();
  const double total_choices = static_cast<double>(checked_mul(top_k, tokens));
  const auto positive = static_cast<int>(std::count_if(popularity.begin(), popularity.end(), [](double p) { return p > 0; }));
  if (positive < top_k)
    throw InputError("the routing gives positive popularity to " + std::to_string(positive) +
                     " experts, fewer than top_k = " + std::to_string(top_k) +
                     ": a token must choose k distinct experts");
  // Water-filling: expected tokens x_e = min(B, c * p_e) with sum x_e = k*B. Experts are capped in
  // order of popularity until the uncapped rest can absorb what is left.
  std::vector<std::size_t> order(E);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return popularity[a] > popularity[b]; });
  double rest_popularity = 0;
  for (double p : popularity) rest_popularity += p;
  const auto B = static_cast<double>(tokens);
  std::size_t capped = 0;
  double scale = total_choices / rest_popularity;
  while (capped < E && popularity[order[capped]] * scale > B) {
    rest_popularity -= popularity[order[capped]];
    ++capped;
    scale = (total_choices - static_cast<double>(capped) * B) / rest_popularity;
  }
  std::vector<double> expected(E);
  for (std::size_t i = 0; i < E; ++i) expected[order[i]] = i < capped ? B : popularity[order[i]] * scale;

  // The floors, and the experts grouped by equal remainder, groups by falling remainder, each in
  // ascending expert id: what every rotation's largest-remainder order is made of.
  floors_.resize(E);
  std::int64_t assigned = 0;
  for (std::size_t e = 0; e < E; ++e) {
    floors_[e] = std::min(tokens, static_cast<std::int64_t>(std::floor(expected[e] + 1e-9)));
    assigned += floors_[e];
  }
  left_ = checked_mul(top_k, tokens) - assigned;
  std::vector<std::size_t> by_remainder(E);
  std::iota(by_remainder.begin(), by_remainder.end(), std::size_t{0});
  const auto remainder = [&](std::size_t e) { return expected[e] - static_cast<double>(floors_[e]); };
  std::sort(by_remainder.begin(), by_remainder.end(), [&](std::size_t a, std::size_t b) {
    const double ra = remainder(a), rb = remainder(b);
    return ra != rb ? ra > rb : a < b;
  });
  for (std::size_t i = 0; i < E; ++i) {
    if (i == 0 || remainder(by_remainder[i]) != remainder(by_remainder[i - 1])) group_starts_.push_back(i);
  }
  group_starts_.push_back(E);
  by_remainder_ = std::move(by_remainder);
}

std::vector<std::int64_t> PopularityRounding::demand(int rotation) const {
  const std::size_t E = floors_.size();
  // Largest remainder, ties broken by place (e - rotation) mod E: within a group of equal
  // remainders, the experts at or above the rotation first, then those below it.
  const auto rot = static_cast<std::size_t>(rotation) % std::max<std::size_t>(E, 1);
  std::vector<std::size_t> order;
  order.reserve(E);
  for (std::size_t g = 0; g + 1 < group_starts_.size(); ++g) {
    const auto first = by_remainder_.begin() + static_cast<std::ptrdiff_t>(group_starts_[g]);
    const auto last = by_remainder_.begin() + static_cast<std::ptrdiff_t>(group_starts_[g + 1]);
    const auto split = std::lower_bound(first, last, rot);
    order.insert(order.end(), split, last);
    order.insert(order.end(), first, split);
  }
  std::vector<std::int64_t> out = floors_;
  std::int64_t left = left_;
  // Each pass adds at most one per expert; a second pass is needed only when rounding errors left
  // more than E choices, which the water-filling above rules out up to round-off.
  while (left > 0) {
    std::int64_t added = 0;
    for (std::size_t e : order) {
      if (left == 0) break;
      if (out[e] < tokens_ && popularity_[e] > 0) {
        ++out[e];
        --left;
        ++added;
      }
    }
    MOESIM_CHECK(added > 0, "routing rounding could not place every choice");
  }
  while (left < 0) {  // round-off above k*B: take back from the smallest remainders
    for (auto it = order.rbegin(); it != order.rend() && left < 0; ++it) {
      if (out[*it] > 0) {
        --out[*it];
        ++left;
      }
    }
  }
  return out;
}

std::vector<std::int64_t> demand_from_popularity(const std::vector<double>& popularity, int top_k,
                                                 std::int64_t tokens, int rotation) {
  return PopularityRounding(popularity, top_k, tokens).demand(rotation);
}

std::vector<double> zipf_popularity(int experts, double exponent, std::uint64_t seed) {
  std::vector<int> rank(static_cast<std::size_t>(experts));
  std::iota(rank.begin(), rank.end(), 1);
  std::mt19937_64 rng(seed);
  for (std::size_t i = rank.size(); i > 1; --i) std::swap(rank[i - 1], rank[rng() % i]);
  std::vector<double> p(rank.size());
  for (std::size_t e = 0; e < rank.size(); ++e) p[e] = std::pow(static_cast<double>(rank[e]), -exponent);
  return p;
}

std::vector<std::vector<double>> read_routing_matrix(const std::string& path, int ranks, int experts) {
  // A regular file of at most 1 GiB (a FIFO or /dev/zero would be read without end).
  std::istringstream in(read_input_file(path, std::uintmax_t{1} << 30, "routing matrix file"));
  std::vector<std::vector<double>> rows;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const SourceLocation where{path, line_no, 1};
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    if (rows.size() >= static_cast<std::size_t>(ranks))
      throw InputError(where, "routing matrix has more than " + std::to_string(ranks) +
                                  " rows: give one row per source rank of the expert-parallel group, or one row "
                                  "for all");
    std::vector<double> row;
    std::stringstream cells(line);
    std::string cell;
    int column = 0;
    while (std::getline(cells, cell, ',')) {
      ++column;
      const auto a = cell.find_first_not_of(" \t\r"), b = cell.find_last_not_of(" \t\r");
      const std::string text = a == std::string::npos ? "" : cell.substr(a, b - a + 1);
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v))
        throw InputError(where, "routing matrix column " + std::to_string(column) + ": '" + text +
                                    "' is not a number");
      if (v < 0)
        throw InputError(where, "routing matrix column " + std::to_string(column) + ": " + text +
                                    " is negative; token counts must be >= 0");
      row.push_back(v);
    }
    if (row.size() != static_cast<std::size_t>(experts))
      throw InputError(where, "routing matrix row has " + std::to_string(row.size()) + " columns; the model has " +
                                  std::to_string(experts) + " experts (one column per expert)");
    if (std::all_of(row.begin(), row.end(), [](double v) { return v == 0; }))
      throw InputError(where, "routing matrix row is all zeros: a source rank must route its tokens somewhere");
    rows.push_back(std::move(row));
  }
  if (rows.size() != 1 && rows.size() != static_cast<std::size_t>(ranks))
    throw InputError(SourceLocation{path, line_no, 0},
                     "routing matrix has " + std::to_string(rows.size()) + " rows; it needs 1 (every rank alike) or " +
                         std::to_string(ranks) + " (one per rank of the expert-parallel group)");
  return rows;
}

RoutingStats uniform_routing_stats(const RoutingShape& shape) {
  const std::vector<std::int64_t> row =
      demand_from_popularity(std::vector<double>(static_cast<std::size_t>(shape.experts), 1.0), shape.top_k,
                             shape.tokens, 0);
  RoutingStats st;
  st.routing = "uniform";
  std::int64_t routed = 0, kept = 0, max_routed = 0, max_kept = 0;
  for (std::size_t e = 0; e < row.size(); ++e) {
    routed += row[e];
    kept += std::min(row[e], shape.capacity);
    if (row[e] > max_routed) {
      max_routed = row[e];
      st.busiest_expert = static_cast<int>(e);
    }
    max_kept = std::max(max_kept, std::min(row[e], shape.capacity));
  }
  st.routed = checked_mul(routed, shape.ranks);
  st.dropped = checked_mul(routed - kept, shape.ranks);
  st.expert_imbalance = routed > 0 ? static_cast<double>(max_routed) * shape.experts / static_cast<double>(routed) : 1.0;
  st.kept_expert_imbalance = kept > 0 ? static_cast<double>(max_kept) * shape.experts / static_cast<double>(kept) : 1.0;
  return st;
}

RoutingPlan make_routing_plan(const RoutingSpec& spec, const RoutingShape& shape, std::uint64_t seed) {
  MOESIM_CHECK(!spec.balanced(), "make_routing_plan is for imbalanced routing");
  const int N = shape.ranks, E = shape.experts;
  std::vector<std::vector<double>> rows;
  if (spec.kind == RoutingKind::kZipf) {
    rows.push_back(zipf_popularity(E, spec.zipf_exponent, seed));
  } else {
    rows = read_routing_matrix(spec.matrix_path, N, E);
  }
  std::vector<std::int64_t> demand;
  demand.reserve(static_cast<std::size_t>(N) * static_cast<std::size_t>(E));
  // One row for every rank (zipf, a one-line matrix): its water-filling and remainders once, each
  // rank only its rotation of the ties.
  std::optional<PopularityRounding> shared;
  for (int s = 0; s < N; ++s) {
    try {
      if (rows.size() == 1 && !shared) shared.emplace(rows.front(), shape.top_k, shape.tokens);
      const std::vector<std::int64_t> d =
          shared ? shared->demand(s)
                 : demand_from_popularity(rows[static_cast<std::size_t>(s)], shape.top_k, shape.tokens, s);
      demand.insert(demand.end(), d.begin(), d.end());
    } catch (const InputError& e) {
      if (spec.kind == RoutingKind::kMatrix)
        throw InputError(SourceLocation{spec.matrix_path, 0, 0}, "row of rank " + std::to_string(s) + ": " + e.rule());
      throw;
    }
  }
  return RoutingPlan(shape, std::move(demand), spec.to_string());
}

}  // namespace moesim
