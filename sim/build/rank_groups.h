// The rank groups of DeepSpeed-TED's layout (sim/spec/parallel_layout.h) that a collective runs
// over, and how a collective's task id tells the groups of one kind apart: dispatch.tp1.c0,
// fc2.allreduce.ep3.c0, with .dp<r> in replicas r > 0 when the world spans them; expert-parallel
// ids of a single group are unchanged (dispatch.c0).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/spec/parallel_layout.h"

namespace moesim {

enum class GroupKind { kExpert, kTensor, kExpertData, kDenseData };

class RankGroups {
 public:
  explicit RankGroups(ParallelLayout layout) : layout_(layout) {}

  const ParallelLayout& layout() const { return layout_; }
  // The members of the `kind` group that holds `rank`.
  std::vector<int> members(GroupKind kind, int rank) const;
  // Which group of `kind` holds `rank`: ranks with equal keys have equal members().
  std::int64_t key(GroupKind kind, int rank) const;
  // Tells apart, in task ids, the collectives of the different groups of one kind; empty where the
  // layout has one group of the kind, so that expert-parallel ids stay `L0.fwd.dispatch.c0`. The
  // same collective has the same id whichever ranks the graph simulates.
  std::string id_suffix(GroupKind kind, int rank) const;

 private:
  ParallelLayout layout_;
};

}  // namespace moesim
