// CollectiveModel: the activity model that executes collective tasks (all-to-all, all-reduce,
// all-gather, reduce-scatter).
//
// It IS an ActivityModel (activity_model.h): the engine starts a collective on it once every
// simulated member has reached it (rendezvous through stream edges), asks it for its next
// completion and advances it; the model never schedules events. Two implementations are intended:
// AlphaBetaNetwork (alpha_beta.h: one latency and bandwidth per link class, for huge sweeps) and a
// topology-aware flow model (design.md section 4: collectives decomposed into flows over a link
// graph, sharing links max-min fairly). Both report the same isolated (contention-free) duration
// where contention is absent, which is how they are cross-checked.
#pragma once

#include <vector>

#include "sim/engine/activity_model.h"
#include "sim/graph/task.h"

namespace moesim {

class CollectiveModel : public ActivityModel {
 public:
  bool handles(const Task& task) const override { return task.is_collective(); }

  // Duration of `work` over the rank group `group` (sorted world ranks) with nothing else running.
  virtual TimeNs isolated_duration(const CollectiveWork& work, const std::vector<int>& group) const = 0;
};

}  // namespace moesim
