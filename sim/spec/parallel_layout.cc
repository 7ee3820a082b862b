#include "sim/spec/parallel_layout.h"

namespace moesim {

std::vector<int> ParallelLayout::tensor_group(int rank) const {
  std::vector<int> out;
  for (int t = 0; t < tp; ++t) out.push_back(rank_of(dp_index(rank), ep_index(rank), t));
  return out;
}

std::vector<int> ParallelLayout::expert_group(int rank) const {
  std::vector<int> out;
  for (int e = 0; e < ep; ++e) out.push_back(rank_of(dp_index(rank), e, tp_index(rank)));
  return out;
}

std::vector<int> ParallelLayout::expert_data_group(int rank) const {
  std::vector<int> out;
  for (int d = 0; d < dp; ++d) out.push_back(rank_of(d, ep_index(rank), tp_index(rank)));
  return out;
}

std::vector<int> ParallelLayout::dense_data_group(int rank) const {
  std::vector<int> out;
  for (int d = 0; d < dp; ++d)
    for (int e = 0; e < ep; ++e) out.push_back(rank_of(d, e, tp_index(rank)));
  return out;
}

std::string ParallelLayout::describe() const {
  return "tp " + std::to_string(tp) + " x ep " + std::to_string(ep) + " x dp " + std::to_string(dp) + " = " +
         std::to_string(world()) + " GPUs";
}

}  // namespace moesim
