// Capacity-assignment inputs and outputs shared by the host test of the sort-based steps
// (routing_test.cc) and the GPU test of the kernel (tests/runtime/kernels_gpu_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/kernel_args.h"

namespace moesim::runtime::testing {

struct AssignmentCase {
  std::int64_t tokens;
  int experts, k;
  std::int64_t capacity;
  int chunks;

  std::string label(bool skewed) const {
    return "B " + std::to_string(tokens) + " E " + std::to_string(experts) + " k " + std::to_string(k) + " C " +
           std::to_string(capacity) + " n " + std::to_string(chunks) + (skewed ? " skewed" : "");
  }
};

// Each token's k choices are distinct experts, as routing gives; skewed: expert 0 is every
// token's first choice, so it overflows whenever capacity < tokens.
inline std::vector<std::int32_t> random_choices(const AssignmentCase& c, bool skewed, std::mt19937& rng) {
  std::vector<std::int32_t> topk_idx(static_cast<std::size_t>(c.tokens * c.k));
  std::vector<int> experts(static_cast<std::size_t>(c.experts));
  std::iota(experts.begin(), experts.end(), 0);
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    std::shuffle(experts.begin(), experts.end(), rng);
    if (skewed) std::swap(*std::find(experts.begin(), experts.end(), 0), experts[0]);
    std::copy(experts.begin(), experts.begin() + c.k, topk_idx.begin() + t * c.k);
  }
  return topk_idx;
}

// The outputs of one assignment on the host, poisoned with 7 before it runs.
struct Assignment {
  std::vector<std::int32_t> topk_row, row_token, row_choice, tokens_per_expert;

  AssignArgs args(const std::vector<std::int32_t>& topk_idx, const AssignmentCase& c) {
    topk_row.assign(static_cast<std::size_t>(c.tokens * c.k), 7);
    row_token.assign(static_cast<std::size_t>(c.experts * c.capacity), 7);
    row_choice.assign(row_token.size(), 7);
    tokens_per_expert.assign(static_cast<std::size_t>(c.experts), 7);
    return AssignArgs{topk_idx.data(), c.tokens,        c.experts,        c.k,
                      c.capacity,      c.chunks,        topk_row.data(),  row_token.data(),
                      row_choice.data(), tokens_per_expert.data()};
  }
  bool operator==(const Assignment& o) const {
    return topk_row == o.topk_row && row_token == o.row_token && row_choice == o.row_choice &&
           tokens_per_expert == o.tokens_per_expert;
  }
};

}  // namespace moesim::runtime::testing
