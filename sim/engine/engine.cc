#include "sim/engine/engine.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <unordered_map>

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

void Engine::queue_kernels(std::vector<KernelRole> role_of_task) {
  MOESIM_CHECK(role_of_task.size() == graph_.num_tasks(), "queue_kernels needs one role per task of the graph");
  kernel_roles_ = std::move(role_of_task);
}

void Engine::issue_from_host(HostIssueSpec spec) {
  MOESIM_CHECK(spec.launch_ns.size() == graph_.num_tasks(), "issue_from_host needs one launch time per task of the graph");
  host_issue_ = std::move(spec);
}

namespace {

// One run of the engine: the tasks' models, ranks and pending predecessors, what is ready and
// running, and the busy counts of the ranks a time step touched.
class EngineRun {
 public:
  EngineRun(const TaskGraph& graph, const std::vector<std::unique_ptr<ActivityModel>>& models,
            const std::vector<EngineObserver*>& observers, const std::vector<int>& device_of_rank,
            const std::vector<KernelRole>& kernel_roles, const HostIssueSpec& host_issue)
      : graph_(graph), models_(models), observers_(observers), num_tasks_(graph.num_tasks()),
        model_of_(num_tasks_), ranks_(num_tasks_), pending_(num_tasks_), running_(num_tasks_, false),
        concurrency_(device_of_rank.empty() ? Concurrency(graph.world_size()) : Concurrency(device_of_rank)) {
    if (!kernel_roles.empty()) kernels_ = KernelQueue(kernel_roles, graph.world_size());
    resolve_models();
    // The ranks of each shared device, so that a change on one rank reaches every rank of its
    // device (empty when every rank has its own).
    if (!device_of_rank.empty()) {
      ranks_of_device_.resize(device_of_rank.size());
      for (std::size_t r = 0; r < device_of_rank.size(); ++r)
        ranks_of_device_[static_cast<std::size_t>(device_of_rank[r])].push_back(static_cast<int>(r));
    }
    if (!host_issue.launch_ns.empty()) {
      host_ = HostIssuer(host_issue, ranks_, graph);
      // A gated task's issue counts as one more predecessor.
      for (TaskIndex i = 0; i < num_tasks_; ++i)
        if (host_.gates(i)) ++pending_[i];
    }
    for (TaskIndex i = 0; i < num_tasks_; ++i) {
      if (pending_[i] == 0) {
        ready_.push_back(i);
        for (EngineObserver* o : observers_) o->on_task_ready(i, 0);
      }
    }
    if (host_.active()) {
      host_.begin(newly_issued_);
      queue_issued();
      release_issued(0);
    }
  }

  TimeNs run() {
    TimeNs now = 0;
    while (true) {
      start_ready(now);
      notify_concurrency(now);
      if (num_done_ == num_tasks_) return now;
      now = next_event(now);
      for (const auto& model : models_) finish(*model, now);
      release_issued(now);
    }
  }

 private:
  // Each task belongs to exactly one model; resolved once up front so errors surface before
  // anything runs.
  void resolve_models() {
    for (TaskIndex i = 0; i < num_tasks_; ++i) {
      const Task& task = graph_.task(i);
      std::size_t count = 0;
      for (std::size_t m = 0; m < models_.size(); ++m) {
        if (models_[m]->handles(task)) {
          if (count == 0) model_of_[i] = m;
          ++count;
        }
      }
      if (count != 1) throw InternalError(ownership_error(task, i, count));
      ranks_[i] = graph_.ranks_of(i);
      pending_[i] = graph_.num_predecessors(i);
    }
  }

  std::string ownership_error(const Task& task, TaskIndex i, std::size_t count) const {
    std::string msg = "task '" + task.id + "' (index " + std::to_string(i) + ", " +
                      std::string(to_string(task.kind())) + ") is handled by ";
    if (count == 0) return msg + "no activity model";
    msg += std::to_string(count) + " activity models:";
    for (const auto& model : models_)
      if (model->handles(task)) msg += " " + std::string(model->name());
    return msg;
  }

  // Remembers the busy counts of `rank` (and of the ranks sharing its device) before this step.
  void touch(int rank) {
    if (ranks_of_device_.empty()) {
      touched_.emplace(rank, busy_counts(concurrency_, rank));
      return;
    }
    for (int r : ranks_of_device_[static_cast<std::size_t>(concurrency_.device_of(rank))])
      touched_.emplace(r, busy_counts(concurrency_, r));
  }

  // Starts everything that became ready at `now`, in ascending task index. Concurrency is updated
  // for all of them first so each model sees the full set of tasks running at `now`.
  void start_ready(TimeNs now) {
    std::sort(ready_.begin(), ready_.end());
    if (kernels_.active()) {
      // Kernels starting now hold the SMs for the copies that can start now but arrived after them.
      for (TaskIndex i : ready_)
        if (kernels_.holds(i)) kernels_.started(i, single_device(i));
      hold_back_queued_kernels(now);
    }
    for (TaskIndex i : ready_) {
      for (int r : ranks_[i]) {
        touch(r);
        concurrency_.add(r, graph_.task(i).stream, 1);
      }
    }
    for (TaskIndex i : ready_) {
      if (!(kernels_.involves(i) && kernels_.waited(i)))
        for (EngineObserver* o : observers_) o->on_task_start(i, now);
      running_[i] = true;
      models_[model_of_[i]]->start(i, now, concurrency_);
    }
    ready_.clear();
  }

  // Removes from ready_ the tasks that wait for kernels that arrived on their device before them
  // (running, or starting now: start_ready registered those first); KernelQueue releases them later. Observers see
  // them start now, when their stream issues them, as the runtime's events time a kernel (its
  // wait for the SMs inside its duration); their model starts them, and they count as busy,
  // only once released.
  void hold_back_queued_kernels(TimeNs now) {
    std::erase_if(ready_, [&](TaskIndex i) {
      if (!kernels_.queues(i)) return false;
      const auto cached = devices_of_waiting_.find(i);
      const bool waits = kernels_.defer(i, cached != devices_of_waiting_.end() ? cached->second : devices_of(i));
      if (cached != devices_of_waiting_.end()) devices_of_waiting_.erase(cached);
      if (!waits) return false;
      for (EngineObserver* o : observers_) o->on_task_start(i, now);
      return true;
    });
  }

  // `task`'s predecessor `pred`, on another stream, ended at `now`: on one device `task` arrives
  // then; on several, it arrives then on the devices `pred` ran on (sim/engine/kernel_queue.h).
  void arrives_after(TaskIndex task, TaskIndex pred, TimeNs now) {
    const std::vector<int>* devices = several_devices(task);
    if (devices == nullptr) {
      kernels_.arrives_no_earlier_than(task, now);
    } else {
      kernels_.arrives_on_no_earlier_than(task, *devices, devices_of(pred), now);
    }
  }

  // A queued task was issued at `now` by the last of its hosts: on one device it arrives then; on
  // several, each device's kernel when its own host issued it (sim/engine/kernel_queue.h).
  void arrives_issued(TaskIndex task, TimeNs now) {
    const std::vector<int>* devices = several_devices(task);
    if (devices == nullptr) {
      kernels_.arrives_no_earlier_than(task, now);
      return;
    }
    for (const auto& [rank, at] : host_.issues_by_rank(task)) {
      const int device = concurrency_.device_of(rank);
      kernels_.arrives_on_no_earlier_than(task, *devices, std::span<const int>(&device, 1), at);
    }
  }

  // The devices of a queued task on several devices (computed once, until it is ready), or null.
  const std::vector<int>* several_devices(TaskIndex task) {
    if (ranks_[task].size() == 1 || !kernels_.queues(task)) return nullptr;
    auto it = devices_of_waiting_.find(task);
    if (it == devices_of_waiting_.end()) it = devices_of_waiting_.emplace(task, devices_of(task)).first;
    return it->second.size() > 1 ? &it->second : nullptr;
  }

  // The one device of a kernel that holds the SMs (GEMMs and memory-bound kernels run on one rank),
  // without building a vector for each of them.
  std::span<const int> single_device(TaskIndex i) {
    MOESIM_CHECK(ranks_[i].size() == 1, "a kernel that holds the SMs runs on one rank");
    one_device_ = concurrency_.device_of(ranks_[i].front());
    return {&one_device_, 1};
  }

  // The physical devices of a task's ranks, ascending and distinct.
  std::vector<int> devices_of(TaskIndex i) const {
    std::vector<int> devices;
    for (int r : ranks_[i]) devices.push_back(concurrency_.device_of(r));
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    return devices;
  }

  // One concurrency notification per time step, for the ranks whose busy counts changed.
  void notify_concurrency(TimeNs now) {
    std::vector<int> changed;
    for (const auto& [rank, before] : touched_) {
      if (busy_counts(concurrency_, rank) != before) changed.push_back(rank);
    }
    touched_.clear();
    if (!changed.empty()) {
      for (const auto& model : models_) model->on_concurrency_change(changed, now, concurrency_);
    }
  }

  // Moves the tasks the hosts issued into the queue of future issues.
  void queue_issued() {
    for (const auto& entry : newly_issued_) issues_.push(entry);
    newly_issued_.clear();
  }

  // Tasks issued by `now` lose their issue as a pending predecessor: a kernel reaches its GPU's
  // queue when the host launches it, as when an event it waits for resolves.
  void release_issued(TimeNs now) {
    while (!issues_.empty() && issues_.top().first <= now) {
      const TaskIndex i = issues_.top().second;
      issues_.pop();
      if (kernels_.involves(i)) arrives_issued(i, now);
      satisfy(i, now);
    }
  }

  // One predecessor (or the issue) of `task` is met at `now`.
  void satisfy(TaskIndex task, TimeNs now) {
    MOESIM_CHECK(pending_[task] > 0, "successor counted twice");
    if (--pending_[task] == 0) {
      ready_.push_back(task);
      for (EngineObserver* o : observers_) o->on_task_ready(task, now);
    }
  }

  // The next completion of any model, or the next issue of a task by its host.
  TimeNs next_event(TimeNs now) const {
    TimeNs next = issues_.empty() ? kNever : issues_.top().first;
    for (const auto& model : models_) next = std::min(next, model->next_completion());
    if (next == kNever) {
      throw InternalError("simulation stalled at " + std::to_string(now) + " ns: " +
                          std::to_string(num_tasks_ - num_done_) +
                          " tasks remain but no activity model has a next completion" +
                          (host_.active() ? std::string(" and no host can issue (a host waits for a read that cannot end)")
                                          : std::string()));
    }
    MOESIM_CHECK(next >= now, "an activity model reported a completion in the past (" + std::to_string(next) +
                                  " < " + std::to_string(now) + ")");
    return next;
  }

  // Ends the tasks `model` completes by `now` and readies their successors.
  void finish(ActivityModel& model, TimeNs now) {
    finished_.clear();
    model.advance_to(now, finished_);
    served_.clear();
    model.take_served(served_);
    for (const auto& [task, at] : served_)
      for (EngineObserver* o : observers_) o->on_task_served(task, at);
    for (TaskIndex i : finished_) {
      MOESIM_CHECK(i < num_tasks_ && running_[i], "model '" + std::string(model.name()) + "' finished task " +
                                                      std::to_string(i) + ", which is not running");
      MOESIM_CHECK(models_[model_of_[i]].get() == &model,
                   "model '" + std::string(model.name()) + "' finished a task it does not own");
      running_[i] = false;
      ++num_done_;
      for (int r : ranks_[i]) {
        touch(r);
        concurrency_.add(r, graph_.task(i).stream, -1);
      }
      for (EngineObserver* o : observers_) o->on_task_end(i, now);
      // Tasks that waited for this kernel start now (they were ready before: no second notice).
      if (kernels_.holds(i)) kernels_.ended(i, single_device(i), ready_);
      graph_.for_each_successor(i, [&](TaskIndex s) {
        if (kernels_.involves(s) && graph_.task(s).stream != graph_.task(i).stream) arrives_after(s, i, now);
        satisfy(s, now);
      });
      if (host_.active()) {
        host_.ended(i, now, newly_issued_);
        queue_issued();
      }
    }
  }

  const TaskGraph& graph_;
  const std::vector<std::unique_ptr<ActivityModel>>& models_;
  const std::vector<EngineObserver*>& observers_;
  std::size_t num_tasks_;
  std::vector<std::size_t> model_of_;
  std::vector<std::vector<int>> ranks_;
  std::vector<std::size_t> pending_;
  std::vector<bool> running_;
  Concurrency concurrency_;
  std::vector<std::vector<int>> ranks_of_device_;
  KernelQueue kernels_;
  int one_device_ = 0;  // single_device's answer
  // The devices of queued tasks on several ranks whose predecessors are still ending.
  std::unordered_map<TaskIndex, std::vector<int>> devices_of_waiting_;
  std::vector<TaskIndex> ready_;
  std::vector<TaskIndex> finished_;
  std::vector<std::pair<TaskIndex, TimeNs>> served_;
  std::size_t num_done_ = 0;
  std::map<int, BusyCounts> touched_;  // busy counts of the ranks touched this step, as they were before it
  HostIssuer host_;
  HostIssuer::Issued newly_issued_;
  // Issues not yet reached, earliest first (ties by task index, for determinism).
  std::priority_queue<std::pair<TimeNs, TaskIndex>, std::vector<std::pair<TimeNs, TaskIndex>>, std::greater<>> issues_;
};

}  // namespace

TimeNs Engine::run() { return EngineRun(graph_, models_, observers_, device_of_rank_, kernel_roles_, host_issue_).run(); }

}  // namespace moesim
