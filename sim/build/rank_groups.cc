#include "sim/build/rank_groups.h"

#include "sim/core/error.h"

namespace moesim {

std::vector<int> RankGroups::members(GroupKind kind, int rank) const {
  switch (kind) {
    case GroupKind::kExpert:
      return layout_.expert_group(rank);
    case GroupKind::kTensor:
      return layout_.tensor_group(rank);
    case GroupKind::kExpertData:
      return layout_.expert_data_group(rank);
    case GroupKind::kDenseData:
      return layout_.dense_data_group(rank);
  }
  MOESIM_CHECK(false, "unknown group kind");
}

std::int64_t RankGroups::key(GroupKind kind, int rank) const {
  const auto dp = static_cast<std::int64_t>(layout_.dp_index(rank));
  switch (kind) {
    case GroupKind::kExpert:
      return dp * layout_.tp + layout_.tp_index(rank);
    case GroupKind::kTensor:
      return dp * layout_.ep + layout_.ep_index(rank);
    case GroupKind::kExpertData:
      return static_cast<std::int64_t>(layout_.ep_index(rank)) * layout_.tp + layout_.tp_index(rank);
    case GroupKind::kDenseData:
      return layout_.tp_index(rank);
  }
  MOESIM_CHECK(false, "unknown group kind");
}

std::string RankGroups::id_suffix(GroupKind kind, int rank) const {
  const std::string tp = layout_.tp > 1 ? ".tp" + std::to_string(layout_.tp_index(rank)) : "";
  const std::string ep = layout_.ep > 1 ? ".ep" + std::to_string(layout_.ep_index(rank)) : "";
  // The first replica's collectives keep the ids of a one-replica world (gradient sync does not
  // rename the step's all-to-alls).
  const std::string dp = layout_.dp_index(rank) > 0 ? ".dp" + std::to_string(layout_.dp_index(rank)) : "";
  switch (kind) {
    case GroupKind::kExpert:
      return tp + dp;
    case GroupKind::kTensor:
      return ep + dp;
    case GroupKind::kExpertData:
      return ep + tp;
    case GroupKind::kDenseData:
      return tp;
  }
  MOESIM_CHECK(false, "unknown group kind");
}

}  // namespace moesim
