// MPipeMoE online granularity search (IPDPS'23, Alg. 1), with MPMoE's (TPDS'24) extension to the
// pair (granularity, memory-reuse strategy).
//
// Hypothesis of the paper: the best number of partitions n is non-decreasing in the batch size B
// (tokens), and for a fixed B the layer time is U-shaped in n. The search keeps
//   - a sorted map of disjoint token ranges [lo, hi] -> n, with n non-decreasing in tokens, and
//   - a cache B -> n of every batch size already decided.
// choose(B, trial), where trial(n) runs one timed trial at granularity n (the caller simulates it):
//   1. B cached                   -> its n (cache hit, no trial);
//   2. a range covers B           -> its n (range hit, no trial; B is cached);
//   3. otherwise the candidates are [lower, upper], lower = n of the nearest range left of B
//      (n_min if none), upper = n of the nearest range right of B (n_max if none). Monotonicity
//      puts the optimum in that bracket. The walk starts at lower (the end the smaller neighbour
//      informs) and goes upward while the time strictly improves; the first n whose time is not
//      strictly lower than the best so far stops it (U-shape: no later n can be better) and the
//      best so far is chosen, so ties keep the smaller n. When lower == upper (and there is one
//      strategy) the answer is forced and no trial runs.
//   4. B is cached and put into the ranges: if the nearest left (right) range has the chosen n it
//      is widened up to (down to) B, across any gap, since by monotonicity every batch size
//      between them has that n too; otherwise a new range [B, B] is created. Consecutive ranges
//      therefore always differ in n, and B never matches both neighbours (checked).
// Every trial is recorded. The paper all-reduces the trial metric so every rank decides the same;
// here the caller's trial function is the single source of truth.
//
// choose_pair(B, trial(n, s), num_strategies) searches pairs (n, s) the same way: the walk over n
// is unchanged, and at every n it visits it runs all num_strategies strategies and keeps the
// fastest (ties -> the lower strategy index); the time of n is that minimum. A range stores
// (n, s) and is widened only when both match (consecutive ranges then differ in (n, s)); the
// bracket uses n alone, the only part the hypothesis orders. choose(B, trial) is choose_pair with
// one strategy (index 0). One search object must be used with a single num_strategies throughout.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace moesim::search {

struct GranularityChoice {
  int n = 0;
  int strategy = 0;

  friend bool operator==(const GranularityChoice&, const GranularityChoice&) = default;
};

struct TokenRange {
  std::int64_t lo = 0;  // inclusive
  std::int64_t hi = 0;  // inclusive
  GranularityChoice choice;
};

struct GranularityTrial {
  std::int64_t tokens = 0;
  int n = 0;
  int strategy = 0;
  double time = 0.0;  // whatever the trial function measured (seconds or ns; only compared)
};

class OnlineGranularitySearch {
 public:
  using Trial = std::function<double(int n)>;
  using PairTrial = std::function<double(int n, int strategy)>;

  inline static constexpr int kDefaultMinPartitions = 2;
  inline static constexpr int kDefaultMaxPartitions = 8;

  // InputError unless 1 <= n_min <= n_max.
  explicit OnlineGranularitySearch(int n_min = kDefaultMinPartitions,
                                   int n_max = kDefaultMaxPartitions);

  // tokens >= 1, else InputError; a trial returning a negative or non-finite time is an
  // InputError too (the comparison would be meaningless).
  int choose(std::int64_t tokens, const Trial& trial);
  GranularityChoice choose_pair(std::int64_t tokens, const PairTrial& trial, int num_strategies);

  int n_min() const { return n_min_; }
  int n_max() const { return n_max_; }
  std::vector<TokenRange> ranges() const;
  const std::map<std::int64_t, GranularityChoice>& cache() const { return cache_; }
  const std::vector<GranularityTrial>& trials() const { return trials_; }
  std::int64_t total_trials() const { return static_cast<std::int64_t>(trials_.size()); }
  int last_call_trials() const { return last_call_trials_; }
  std::int64_t cache_hits() const { return cache_hits_; }
  std::int64_t range_hits() const { return range_hits_; }
  std::int64_t searches() const { return searches_; }  // calls that reached step 3

  // Throws InternalError (a std::logic_error) when the ranges are not sorted and disjoint, an n
  // decreases with tokens or leaves [n_min, n_max], two consecutive ranges carry the same choice,
  // or a cached B is outside every range or disagrees with its range.
  void check_invariants() const;

 private:
  struct Entry {
    std::int64_t hi;
    GranularityChoice choice;
  };

  double run_trial(std::int64_t tokens, int n, int strategy, const PairTrial& trial);
  void insert(std::int64_t tokens, GranularityChoice choice);

  int n_min_;
  int n_max_;
  int num_strategies_ = 0;                // fixed by the first call
  std::map<std::int64_t, Entry> ranges_;  // lo -> (hi, choice)
  std::map<std::int64_t, GranularityChoice> cache_;
  std::vector<GranularityTrial> trials_;
  int last_call_trials_ = 0;
  std::int64_t cache_hits_ = 0;
  std::int64_t range_hits_ = 0;
  std::int64_t searches_ = 0;
};

}  // namespace moesim::search
