// A fake activity model for the engine tests: fixed durations, no slow-down.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sim/engine/activity_model.h"
#include "sim/engine/rated_activities.h"
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

}  // namespace moesim::testing
