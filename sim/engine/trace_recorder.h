// TraceRecorder: the engine observer that fills a Trace (sim/graph/trace.h) as tasks run.
#pragma once

#include <vector>

#include "sim/core/units.h"
#include "sim/engine/observer.h"
#include "sim/graph/task.h"
#include "sim/graph/trace.h"

namespace moesim {

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
