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
  virtual void on_task_end(TaskIndex /*task*/, TimeNs /*now*/) {}
};

}  // namespace moesim
