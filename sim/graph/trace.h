// Trace: when each task of a graph ran. The simulator (sim/engine/trace_recorder.h) and the
// runtime (runtime/exec/layer_executor.h) produce the same schema (task index into the graph,
// ready/start/end in ns), so the validator can compare them task by task. It lives beside the
// graph, not in the engine, so that the runtime can fill one without linking the engine.
#pragma once

#include <vector>

#include "sim/core/units.h"

namespace moesim {

struct TaskRecord {
  TimeNs ready_ns = -1;  // all dependencies satisfied
  TimeNs start_ns = -1;
  TimeNs end_ns = -1;
};

struct Trace {
  std::vector<TaskRecord> records;  // indexed by TaskIndex
  TimeNs makespan_ns() const;
};

}  // namespace moesim
