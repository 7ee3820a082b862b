#include "sim/build/ordering.h"

#include <algorithm>

namespace moesim {

std::pair<int, int> CommOrder::first_last(bool second) const {
  int first = -1, last = -1;
  for (const auto& [s, c] : issue) {
    if (s != second) continue;
    if (first < 0) first = c;
    last = c;
  }
  return {first, last};
}

std::vector<std::size_t> CommOrder::positions() const {
  std::vector<std::size_t> pos(compute_chunks.size());
  for (std::size_t g = 0; g < compute_chunks.size(); ++g) pos[static_cast<std::size_t>(compute_chunks[g])] = g;
  return pos;
}

CommOrder Ordering::pass_order(Pass pass) const {
  const int n = chunks_;
  CommOrder o;
  for (int i = 0; i < n; ++i) o.compute_chunks.push_back(i);
  auto interleave = [&](const std::vector<int>& chunks) {
    // first(c0) | first(c1) second(c0) | ... | second(c_last)
    for (std::size_t j = 0; j <= chunks.size(); ++j) {
      if (j < chunks.size()) o.issue.emplace_back(false, chunks[j]);
      if (j > 0) o.issue.emplace_back(true, chunks[j - 1]);
    }
  };
  switch (policy_) {
    case OrderPolicy::kMPipeMoE:
      if (pass == Pass::kBackward) {
        interleave(o.compute_chunks);
        break;
      }
      if (!single_comm_stream_) {
        o.second_stream = StreamClass::kCommCombine;
        for (int i = 0; i < n; ++i) o.issue.emplace_back(false, i);
        for (int i = 0; i < n; ++i) o.issue.emplace_back(true, i);
        break;
      }
      [[fallthrough]];  // one channel: the fastermoe forward (see BuildOptions)
    case OrderPolicy::kFasterMoE:
      if (reuse_) {
        // All dispatches first cannot be issued on one stream with bounded slots: FC2 of chunk i
        // waits (reuse) for the combine of chunk i - slots, and dispatch j waits for FC1 of chunk
        // j - slots, so a combine queued behind dispatch j > i + slots would close a cycle. Issue
        // dispatches as far ahead as that allows: combine m goes before dispatch m + 2*slots + 1.
        // Backward has the same shape with the gradient slots (the gradient all-to-all of g
        // waits for fc2.wgrad of g - slots, fc1.dgrad of g for the dispatch of g - slots).
        const int ahead = std::min(n, 2 * slots_ + 1);
        for (int i = 0; i < ahead; ++i) o.issue.emplace_back(false, i);
        for (int m = 0; m < n; ++m) {
          o.issue.emplace_back(true, m);
          if (m + ahead < n) o.issue.emplace_back(false, m + ahead);
        }
        break;
      }
      for (int i = 0; i < n; ++i) o.issue.emplace_back(false, i);
      for (int i = 0; i < n; ++i) o.issue.emplace_back(true, i);
      break;
    case OrderPolicy::kTutel:
      if (pass == Pass::kBackward) std::reverse(o.compute_chunks.begin(), o.compute_chunks.end());
      interleave(o.compute_chunks);
      break;
    case OrderPolicy::kSequential:
      for (int i = 0; i < n; ++i) {
        o.issue.emplace_back(false, i);
        o.issue.emplace_back(true, i);
      }
      break;
  }
  return o;
}

}  // namespace moesim
