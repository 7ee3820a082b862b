// Observers watch the engine's events (design.md section 7, lesson 6): traces, memory tracking
// and reports subscribe; the engine does not know what they do.
#pragma once

#include "sim/core/units.h"
#include "sim/graph/task.h"

namespace moesim {

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // All predecessors of `task` finished at `now` (for a collective: all members arrived).
  virtual void on_task_ready(TaskIndex /*task*/, TimeNs /*now*/) {}
  // Its stream issued `task`: it runs from now, or, queued behind the kernels running on its GPU
  // (sim/engine/kernel_queue.h), waits for them inside its duration, as a GPU's events time it.
  virtual void on_task_start(TaskIndex /*task*/, TimeNs /*now*/) {}
  // A task started earlier, which waited inside its model for a unit of a resource the model
  // holds (a host copy for its GPU's copy engine), got one at `now`: a copy engine's stream times
  // the copy from then (eight virtual ranks' offloads on an H200 measured each at its own copy
  // time, back to back; validate/results/h200-2026-11-27).
  virtual void on_task_served(TaskIndex /*task*/, TimeNs /*now*/) {}
  virtual void on_task_end(TaskIndex /*task*/, TimeNs /*now*/) {}
};

}  // namespace moesim
