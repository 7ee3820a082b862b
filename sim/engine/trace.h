// Trace: when each task ran. The simulator and the runtime produce the same schema (task index
// into the graph, ready/start/end in ns), so the validator can compare them task by task.
#pragma once

#include <vector>

#include "sim/core/units.h"
#include "sim/engine/observer.h"
#include "sim/graph/task.h"

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

// Observer that fills a Trace.
class TraceRecorder final : public EngineObserver {
 public:
  explicit TraceRecorder(std::size_t num_tasks) { trace_.records.resize(num_tasks); }
  void on_task_ready(TaskIndex task, TimeNs now) override { trace_.records[task].ready_ns = now; }
  void on_task_start(TaskIndex task, TimeNs now) override { trace_.records[task].start_ns = now; }
  void on_task_served(TaskIndex task, TimeNs now) override { trace_.records[task].start_ns = now; }
  void on_task_end(TaskIndex task, TimeNs now) override { trace_.records[task].end_ns = now; }
  const Trace& trace() const { return trace_; }
  Trace take() { return std::move(trace_); }

 private:
  Trace trace_;
};

}  // namespace moesim
