// A fake activity model for the engine tests (fixed durations, no slow-down), and a run of a graph with it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sim/engine/activity_model.h"
#include "sim/engine/engine.h"
#include "sim/engine/rated_activities.h"
#include "sim/engine/trace_recorder.h"
#include "sim/graph/task_graph.h"

namespace moesim::testing {

// A fake model with fixed durations: host tasks take their duration, every other task
// `default_ns`; it handles the tasks `accept` selects and never slows down.
class FixedModel final : public ActivityModel {
 public:
  FixedModel(const TaskGraph& graph, std::string name, std::function<bool(const Task&)> accept,
             TimeNs default_ns = 100)
      : graph_(graph), name_(std::move(name)), accept_(std::move(accept)), default_ns_(default_ns) {}

  std::string_view name() const override { return name_; }
  bool handles(const Task& task) const override { return accept_(task); }
  void start(TaskIndex task, TimeNs now, const Concurrency&) override {
    const Task& t = graph_.task(task);
    const auto* host = std::get_if<HostWork>(&t.work);
    activities_.add(task, host != nullptr ? host->duration_ns : default_ns_, now, 1.0);
  }
  void on_concurrency_change(std::span<const int>, TimeNs, const Concurrency&) override {}
  TimeNs next_completion() const override { return activities_.next_completion(); }
  void advance_to(TimeNs now, std::vector<TaskIndex>& finished) override {
    activities_.advance_to(now, finished);
  }

 private:
  const TaskGraph& graph_;
  std::string name_;
  std::function<bool(const Task&)> accept_;
  TimeNs default_ns_;
  RatedActivities activities_;
};

inline bool any_task(const Task&) { return true; }

// Runs `engine` over `g` and returns the trace, checking that the engine's end is its makespan.
inline Trace run_traced(Engine& engine, const TaskGraph& g) {
  TraceRecorder rec(g.num_tasks());
  engine.add_observer(&rec);
  const TimeNs end = engine.run();
  Trace trace = rec.take();
  EXPECT_EQ(end, trace.makespan_ns());
  return trace;
}

// Runs `g` with one FixedModel for every task (and `host` issuing them, when given).
inline Trace run_fixed(const TaskGraph& g, TimeNs default_ns = 100, const HostIssueSpec* host = nullptr) {
  Engine engine(g);
  engine.add_model(std::make_unique<FixedModel>(g, "fixed", any_task, default_ns));
  if (host != nullptr) engine.issue_from_host(*host);
  return run_traced(engine, g);
}

}  // namespace moesim::testing
