// The contract between the engine and the resource models (design.md section 7, lesson 1).
//
// The engine computes no durations and the models schedule no events: the engine starts tasks on
// the model that handles them, asks every model for its next completion, advances all models to
// the earliest one and collects what finished. Models whose speed depends on what else runs on a
// rank (interference) are told when a rank's busy stream counts change; on a device
// shared by several ranks, every rank of the device is told.
#pragma once

#include <array>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/units.h"
#include "sim/graph/task.h"

namespace moesim {

class TaskGraph;

// Which stream classes are busy on each simulated rank right now. Ranks that share one physical
// device (virtual ranks of a loopback run) are counted together: busy(r, s) is the number of
// tasks on stream class s of every rank on r's device.
class Concurrency {
 public:
  explicit Concurrency(int world_size) : device_(static_cast<std::size_t>(world_size)), busy_(device_.size()) {
    for (std::size_t r = 0; r < device_.size(); ++r) device_[r] = static_cast<int>(r);
  }
  // device_of_rank[r]: the device of rank r, in [0, world_size).
  explicit Concurrency(std::vector<int> device_of_rank)
      : device_(std::move(device_of_rank)), busy_(device_.size()) {}

  int busy(int rank, StreamClass s) const { return busy_[device_[rank]][static_cast<int>(s)]; }
  bool any_busy(int rank, StreamClass s) const { return busy(rank, s) > 0; }
  void add(int rank, StreamClass s, int delta) { busy_[device_[rank]][static_cast<int>(s)] += delta; }
  int device_of(int rank) const { return device_[rank]; }

 private:
  std::vector<int> device_;
  std::vector<std::array<int, kNumStreamClasses>> busy_;
};

class ActivityModel {
 public:
  virtual ~ActivityModel() = default;

  // A short name, used in traces and error messages.
  virtual std::string_view name() const = 0;
  // Whether this model executes the task (each task has exactly one model).
  virtual bool handles(const Task& task) const = 0;
  // Begins executing `task` at `now`. The concurrency passed already counts the task itself.
  virtual void start(TaskIndex task, TimeNs now, const Concurrency& concurrency) = 0;
  // The busy stream counts of `ranks` (ascending) changed at `now`: update the speeds of affected
  // activities.
  virtual void on_concurrency_change(std::span<const int> ranks, TimeNs now,
                                     const Concurrency& concurrency) = 0;
  // Time of the earliest completion among running activities, or kNever.
  virtual TimeNs next_completion() const = 0;
  // Advances progress to `now` (never past next_completion()) and appends the tasks that finished
  // at `now`, in ascending task index.
  virtual void advance_to(TimeNs now, std::vector<TaskIndex>& finished) = 0;
  // Moves out the tasks that waited inside this model for a resource and got it since the last
  // call (EngineObserver::on_task_served), with when; the engine asks after each advance_to.
  virtual void take_served(std::vector<std::pair<TaskIndex, TimeNs>>& /*served*/) {}
};

}  // namespace moesim
