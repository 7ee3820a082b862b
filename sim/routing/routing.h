// Routing: how many tokens each rank's router sends to each expert, and what that makes of the
// MoE layer's all-to-alls and expert GEMMs (`--routing zipf:<s>|matrix:<file>`).
//
// Model. Rank s has B tokens; each picks k distinct experts. The expected number of tokens of rank
// s choosing expert e is B * q_e, where q_e, the probability that a token includes e among its k
// choices, is min(1, c * p_e) for the popularity p (Zipf or the matrix row) and the c that makes
// sum_e q_e = k (water-filling: no expert can be chosen twice by one token). These expectations
// are rounded to integers that sum to exactly k*B (largest remainder, ties broken by rotating with
// the source rank so that the rounding does not favour the same experts on every rank). That is
// the demand. Capacity then applies per (source rank, expert), as in GShard's local gating and in
// the graph's padded layout: kept = min(demand, C), the rest is dropped. Chunk c of n carries
// kept/n rows of each (source, expert) pair, the remainder going to the first chunks (each of
// the n micro-batches routes its share of the tokens).
//
// Zipf: p_e proportional to 1 / rank(e)^s, where rank(e) in 1..E is expert e's place in a
// popularity order drawn from the run's seed (a Fisher-Yates shuffle over std::mt19937_64), so
// the hot experts land on ranks the seed picks, not always on rank 0.
//
// Matrix file (CSV): one line per source rank with E non-negative numbers (tokens, or any
// weights) per expert, or a single line used for every rank; blank lines and lines starting with
// '#' are skipped. Each line is a popularity, scaled to k*B choices: a line that already sums to
// k*B with no entry above B is used exactly as written.
//
// What this leaves out, on purpose: batch-to-batch sampling noise (the counts are expectations),
// different routings in different layers (every layer routes alike), and expert placement other
// than contiguous blocks (rank q owns experts q*E/N .. (q+1)*E/N - 1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/spec/routing_spec.h"

namespace moesim {

// The layer sizes routing needs (from LayerDims).
struct RoutingShape {
  int ranks = 1;              // N, the expert-parallel group
  int experts = 1;            // E
  int top_k = 1;              // k
  std::int64_t tokens = 0;    // B per rank
  std::int64_t capacity = 0;  // C per (expert, source rank)
  int chunks = 1;             // n
};

// The imbalance a routing causes, for reports.
struct RoutingStats {
  std::string routing;                 // RoutingSpec::to_string()
  double expert_imbalance = 1.0;       // max / mean choices routed to an expert (before capacity)
  double kept_expert_imbalance = 1.0;  // max / mean rows an expert computes (after capacity)
  double rank_imbalance = 1.0;         // max / mean rows a rank's experts compute
  std::int64_t routed = 0;             // choices made in the whole group: N * k * B
  std::int64_t dropped = 0;            // choices over capacity
  int busiest_expert = 0;              // argmax of the routed choices
  int busiest_rank = 0;                // argmax of the rows computed
  double dropped_fraction() const { return routed > 0 ? static_cast<double>(dropped) / static_cast<double>(routed) : 0.0; }
};

class RoutingPlan {
 public:
  RoutingPlan(const RoutingShape& shape, std::vector<std::int64_t> demand, std::string label);

  const RoutingShape& shape() const { return shape_; }
  // Choices of source rank s for expert e, before and after capacity.
  std::int64_t demand(int s, int e) const { return demand_[index(s, e)]; }
  std::int64_t kept(int s, int e) const { return std::min(demand_[index(s, e)], shape_.capacity); }
  // Rows source s sends to destination d in chunk c (d's experts only).
  std::int64_t pair_rows(int c, int s, int d) const;
  // The N x N row-major matrix of pair_rows for chunk c.
  std::shared_ptr<const std::vector<std::int64_t>> pair_matrix(int c) const { return pairs_.at(static_cast<std::size_t>(c)); }
  std::int64_t sent_rows(int rank, int c) const;
  std::int64_t received_rows(int rank, int c) const;
  const RoutingStats& stats() const { return stats_; }

 private:
  std::size_t index(int s, int e) const;
  RoutingShape shape_;
  std::vector<std::int64_t> demand_;              // N x E (what capacity keeps is derived: N x E more bytes
                                                  // would dominate an every-rank simulation of thousands)
  std::vector<std::shared_ptr<const std::vector<std::int64_t>>> pairs_;  // per chunk, N x N (shared with the graph)
  std::vector<std::int64_t> sent_;                // per chunk, per rank: n x N
  std::vector<std::int64_t> received_;            // n x N
  RoutingStats stats_;
};

// Rows of chunk c when `rows` are split over n chunks (the remainder to the first chunks).
std::int64_t chunk_share(std::int64_t rows, int c, int n);

// Integer demand of one source rank from a popularity (non-negative, not all zero): water-filled
// to at most B per expert, scaled to k*B in total, rounded by largest remainder with ties rotated
// by `rotation`. Throws InputError if k*B choices cannot be made (fewer than k experts with
// positive popularity).
std::vector<std::int64_t> demand_from_popularity(const std::vector<double>& popularity, int top_k,
                                                 std::int64_t tokens, int rotation);

// demand_from_popularity in two steps, for a popularity every rank shares: the water-filling, the
// floors and the remainders' order once (O(E log E)), then each rotation in O(E).
class PopularityRounding {
 public:
  PopularityRounding(const std::vector<double>& popularity, int top_k, std::int64_t tokens);
  std::vector<std::int64_t> demand(int rotation) const;

 private:
  std::vector<double> popularity_;
  std::int64_t tokens_ = 0;
  std::vector<std::int64_t> floors_;
  std::int64_t left_ = 0;                   // choices the floors leave to place
  std::vector<std::size_t> by_remainder_;   // falling remainder; equal ones in ascending id
  std::vector<std::size_t> group_starts_;   // where each run of equal remainders starts, then E
};

// Zipf popularity of E experts with exponent s, hot experts placed by `seed`.
std::vector<double> zipf_popularity(int experts, double exponent, std::uint64_t seed);

// Reads a matrix file: 1 or `ranks` rows of `experts` columns. InputError with file:line.
std::vector<std::vector<double>> read_routing_matrix(const std::string& path, int ranks, int experts);

// The imbalance of uniform routing: every source routes k*B/E choices to every expert (rounded as
// above), capacity applied; the graph pads every expert to C rows anyway.
RoutingStats uniform_routing_stats(const RoutingShape& shape);

// The routing plan of `spec` (not uniform) for `shape`. Throws InputError for a bad matrix file.
RoutingPlan make_routing_plan(const RoutingSpec& spec, const RoutingShape& shape, std::uint64_t seed);

}  // namespace moesim
