#include "sim/engine/engine.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "sim/core/error.h"

namespace moesim {
namespace {

// How many tasks run on each stream class of a rank's device. Counts, not just busy bits: on a
// device shared by virtual ranks a second kernel on the compute streams changes the first's speed.
using BusyCounts = std::array<int, kNumStreamClasses>;
BusyCounts busy_counts(const Concurrency& concurrency, int rank) {
  BusyCounts counts{};
  for (int s = 0; s < kNumStreamClasses; ++s) counts[s] = concurrency.busy(rank, static_cast<StreamClass>(s));
  return counts;
}

}  // namespace

Engine::Engine(const TaskGraph& graph) : graph_(graph) {}

void Engine::add_model(std::unique_ptr<ActivityModel> model) {
  MOESIM_CHECK(model != nullptr, "a null activity model was registered");
  models_.push_back(std::move(model));
}

void Engine::add_observer(EngineObserver* observer) {
  MOESIM_CHECK(observer != nullptr, "a null observer was registered");
  observers_.push_back(observer);
}

void Engine::share_devices(std::vector<int> device_of_rank) {
  MOESIM_CHECK(static_cast<int>(device_of_rank.size()) == graph_.world_size(),
               "share_devices needs one device per rank of the graph");
  for (int d : device_of_rank)
    MOESIM_CHECK(d >= 0 && d < graph_.world_size(), "a device index outside [0, world size)");
  device_of_rank_ = std::move(device_of_rank);
}

TimeNs Engine::run() {
  const std::size_t num_tasks = graph_.num_tasks();

  // Each task belongs to exactly one model; resolve it once up front so errors surface before
  // anything runs.
  std::vector<std::size_t> model_of(num_tasks);
  std::vector<std::vector<int>> ranks(num_tasks);
  std::vector<std::size_t> pending(num_tasks);
  for (TaskIndex i = 0; i < num_tasks; ++i) {
    const Task& task = graph_.task(i);
    std::size_t count = 0;
    for (std::size_t m = 0; m < models_.size(); ++m) {
      if (models_[m]->handles(task)) {
        if (count == 0) model_of[i] = m;
        ++count;
      }
    }
    if (count != 1) {
      std::string msg = "task '" + task.id + "' (index " + std::to_string(i) + ", " +
                        std::string(to_string(task.kind())) + ") is handled by ";
      if (count == 0) {
        msg += "no activity model";
      } else {
        msg += std::to_string(count) + " activity models:";
        for (const auto& model : models_)
          if (model->handles(task)) msg += " " + std::string(model->name());
      }
      throw InternalError(msg);
    }
    ranks[i] = graph_.ranks_of(i);
    pending[i] = graph_.predecessors(i).size();
  }

  // The ranks of each shared device, so that a change on one rank reaches every rank of its device
  // (empty when every rank has its own).
  std::vector<std::vector<int>> ranks_of_device;
  if (!device_of_rank_.empty()) {
    ranks_of_device.resize(device_of_rank_.size());
    for (std::size_t r = 0; r < device_of_rank_.size(); ++r)
      ranks_of_device[static_cast<std::size_t>(device_of_rank_[r])].push_back(static_cast<int>(r));
  }
  Concurrency concurrency = device_of_rank_.empty() ? Concurrency(graph_.world_size()) : Concurrency(device_of_rank_);
  std::vector<bool> running(num_tasks, false);
  std::vector<TaskIndex> ready;
  for (TaskIndex i = 0; i < num_tasks; ++i) {
    if (pending[i] == 0) {
      ready.push_back(i);
      for (EngineObserver* o : observers_) o->on_task_ready(i, 0);
    }
  }

  // Busy counts of the ranks touched during the current time step, as they were before it.
  std::map<int, BusyCounts> touched;
  auto touch = [&](int rank) {
    if (ranks_of_device.empty()) {
      touched.emplace(rank, busy_counts(concurrency, rank));
      return;
    }
    for (int r : ranks_of_device[static_cast<std::size_t>(concurrency.device_of(rank))])
      touched.emplace(r, busy_counts(concurrency, r));
  };

  TimeNs now = 0;
  std::size_t num_done = 0;
  std::vector<TaskIndex> finished;
  while (true) {
    // Start everything that became ready at `now`, in ascending task index. Concurrency is
    // updated for all of them first so each model sees the full set of tasks running at `now`.
    std::sort(ready.begin(), ready.end());
    for (TaskIndex i : ready) {
      const Task& task = graph_.task(i);
      for (int r : ranks[i]) {
        touch(r);
        concurrency.add(r, task.stream, 1);
      }
    }
    for (TaskIndex i : ready) {
      for (EngineObserver* o : observers_) o->on_task_start(i, now);
      running[i] = true;
      models_[model_of[i]]->start(i, now, concurrency);
    }
    ready.clear();

    // One concurrency notification per time step, for the ranks whose busy counts changed.
    std::vector<int> changed;
    for (const auto& [rank, before] : touched) {
      if (busy_counts(concurrency, rank) != before) changed.push_back(rank);
    }
    touched.clear();
    if (!changed.empty()) {
      for (const auto& model : models_) model->on_concurrency_change(changed, now, concurrency);
    }

    if (num_done == num_tasks) break;

    TimeNs next = kNever;
    for (const auto& model : models_) next = std::min(next, model->next_completion());
    if (next == kNever) {
      throw InternalError("simulation stalled at " + std::to_string(now) + " ns: " +
                          std::to_string(num_tasks - num_done) +
                          " tasks remain but no activity model has a next completion");
    }
    MOESIM_CHECK(next >= now, "an activity model reported a completion in the past (" +
                                  std::to_string(next) + " < " + std::to_string(now) + ")");
    now = next;

    for (const auto& model : models_) {
      finished.clear();
      model->advance_to(now, finished);
      for (TaskIndex i : finished) {
        MOESIM_CHECK(i < num_tasks && running[i],
                     "model '" + std::string(model->name()) + "' finished task " +
                         std::to_string(i) + ", which is not running");
        MOESIM_CHECK(models_[model_of[i]] == model,
                     "model '" + std::string(model->name()) + "' finished a task it does not own");
        running[i] = false;
        ++num_done;
        const Task& task = graph_.task(i);
        for (int r : ranks[i]) {
          touch(r);
          concurrency.add(r, task.stream, -1);
        }
        for (EngineObserver* o : observers_) o->on_task_end(i, now);
        for (TaskIndex s : graph_.successors(i)) {
          MOESIM_CHECK(pending[s] > 0, "successor counted twice");
          if (--pending[s] == 0) {
            ready.push_back(s);
            for (EngineObserver* o : observers_) o->on_task_ready(s, now);
          }
        }
      }
    }
  }
  return now;
}

}  // namespace moesim
