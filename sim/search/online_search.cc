#include "sim/search/online_search.h"

#include <cmath>
#include <iterator>
#include <string>

#include "sim/core/error.h"

namespace moesim::search {

OnlineGranularitySearch::OnlineGranularitySearch(int n_min, int n_max)
    : n_min_(n_min), n_max_(n_max) {
  if (n_min < 1 || n_max < n_min) {
    throw InputError("online granularity search: need 1 <= n_min <= n_max, got n_min = " +
                     std::to_string(n_min) + ", n_max = " + std::to_string(n_max));
  }
}

int OnlineGranularitySearch::choose(std::int64_t tokens, const Trial& trial) {
  if (!trial) throw InputError("online granularity search: empty trial function");
  const PairTrial single = [&trial](int n, int /*strategy*/) { return trial(n); };
  return choose_pair(tokens, single, 1).n;
}

double OnlineGranularitySearch::run_trial(std::int64_t tokens, int n, int strategy,
                                          const PairTrial& trial) {
  const double t = trial(n, strategy);
  if (!std::isfinite(t) || t < 0.0) {
    throw InputError("online granularity search: trial at B = " + std::to_string(tokens) +
                     ", n = " + std::to_string(n) + ", strategy = " + std::to_string(strategy) +
                     " returned " + std::to_string(t) + "; a time must be finite and >= 0");
  }
  trials_.push_back(GranularityTrial{tokens, n, strategy, t});
  ++last_call_trials_;
  return t;
}

GranularityChoice OnlineGranularitySearch::choose_pair(std::int64_t tokens, const PairTrial& trial,
                                                       int num_strategies) {
  last_call_trials_ = 0;
  if (tokens < 1) {
    throw InputError("online granularity search: batch size B must be >= 1 token, got " +
                     std::to_string(tokens));
  }
  if (num_strategies < 1) {
    throw InputError("online granularity search: num_strategies must be >= 1, got " +
                     std::to_string(num_strategies));
  }
  if (num_strategies_ != 0 && num_strategies != num_strategies_) {
    throw InputError("online granularity search: num_strategies changed from " +
                     std::to_string(num_strategies_) + " to " + std::to_string(num_strategies) +
                     " between calls on one search");
  }
  if (!trial) throw InputError("online granularity search: empty trial function");
  num_strategies_ = num_strategies;

  if (const auto cached = cache_.find(tokens); cached != cache_.end()) {
    ++cache_hits_;
    return cached->second;
  }

  const auto right = ranges_.upper_bound(tokens);  // first range with lo > tokens
  const auto left = right == ranges_.begin() ? ranges_.end() : std::prev(right);
  if (left != ranges_.end() && left->second.hi >= tokens) {
    ++range_hits_;
    cache_.emplace(tokens, left->second.choice);
    return left->second.choice;
  }

  ++searches_;
  const int lower = left != ranges_.end() ? left->second.choice.n : n_min_;
  const int upper = right != ranges_.end() ? right->second.choice.n : n_max_;
  MOESIM_CHECK(lower <= upper,
               "neighbouring ranges out of order around B = " + std::to_string(tokens));

  GranularityChoice best{lower, 0};
  if (lower != upper || num_strategies > 1) {
    // Time of n = its fastest strategy (ties -> lower index).
    const auto evaluate = [&](int n, int& best_strategy) {
      double best_time = run_trial(tokens, n, 0, trial);
      best_strategy = 0;
      for (int s = 1; s < num_strategies; ++s) {
        const double t = run_trial(tokens, n, s, trial);
        if (t < best_time) {
          best_time = t;
          best_strategy = s;
        }
      }
      return best_time;
    };
    double best_time = evaluate(lower, best.strategy);
    for (int n = lower + 1; n <= upper; ++n) {
      int strategy = 0;
      const double t = evaluate(n, strategy);
      if (!(t < best_time)) break;  // first non-improvement: past the bottom of the U
      best_time = t;
      best = GranularityChoice{n, strategy};
    }
  }

  insert(tokens, best);
  cache_.emplace(tokens, best);
  return best;
}

void OnlineGranularitySearch::insert(std::int64_t tokens, GranularityChoice choice) {
  const auto right = ranges_.upper_bound(tokens);
  const auto left = right == ranges_.begin() ? ranges_.end() : std::prev(right);
  const bool left_match = left != ranges_.end() && left->second.choice == choice;
  const bool right_match = right != ranges_.end() && right->second.choice == choice;
  // Consecutive ranges always carry different choices (a new range is created only when it
  // differs from both neighbours, widening keeps choices), so B cannot match both sides.
  MOESIM_CHECK(!(left_match && right_match),
               "both neighbours of B = " + std::to_string(tokens) + " carry the same choice");
  if (left_match) {
    left->second.hi = tokens;
  } else if (right_match) {
    const Entry entry = right->second;
    ranges_.erase(right);
    ranges_.emplace(tokens, entry);
  } else {
    ranges_.emplace(tokens, Entry{tokens, choice});
  }
}

std::vector<TokenRange> OnlineGranularitySearch::ranges() const {
  std::vector<TokenRange> out;
  out.reserve(ranges_.size());
  for (const auto& [lo, entry] : ranges_) out.push_back(TokenRange{lo, entry.hi, entry.choice});
  return out;
}

void OnlineGranularitySearch::check_invariants() const {
  const auto fail = [](const std::string& what) {
    throw InternalError("online granularity search invariant violated: " + what);
  };
  const TokenRange* previous = nullptr;
  const std::vector<TokenRange> all = ranges();
  for (const TokenRange& range : all) {
    const std::string where =
        "range [" + std::to_string(range.lo) + ", " + std::to_string(range.hi) + "]";
    if (range.lo > range.hi) fail(where + " is empty");
    if (range.choice.n < n_min_ || range.choice.n > n_max_) {
      fail(where + " has n = " + std::to_string(range.choice.n) + " outside [" +
           std::to_string(n_min_) + ", " + std::to_string(n_max_) + "]");
    }
    if (range.choice.strategy < 0 ||
        (num_strategies_ > 0 && range.choice.strategy >= num_strategies_)) {
      fail(where + " has strategy " + std::to_string(range.choice.strategy));
    }
    if (previous != nullptr) {
      if (previous->hi >= range.lo) fail(where + " overlaps or precedes the previous range");
      if (previous->choice.n > range.choice.n) fail(where + " has n below the previous range's");
      if (previous->choice == range.choice) fail(where + " repeats the previous range's choice");
    }
    previous = &range;
  }
  for (const auto& [tokens, choice] : cache_) {
    const auto right = ranges_.upper_bound(tokens);
    if (right == ranges_.begin()) fail("cached B = " + std::to_string(tokens) + " in no range");
    const auto& entry = std::prev(right)->second;
    if (entry.hi < tokens) fail("cached B = " + std::to_string(tokens) + " in no range");
    if (!(entry.choice == choice)) {
      fail("cached B = " + std::to_string(tokens) + " disagrees with its range");
    }
  }
}

}  // namespace moesim::search
