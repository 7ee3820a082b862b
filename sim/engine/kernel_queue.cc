#include "sim/engine/kernel_queue.h"

#include <algorithm>

#include "sim/core/error.h"

namespace moesim {

KernelQueue::KernelQueue(std::vector<KernelRole> roles, int devices)
    : roles_(std::move(roles)), arrival_(roles_.size(), 0), waited_(roles_.size(), false),
      running_(static_cast<std::size_t>(devices)) {}

void KernelQueue::arrives_no_earlier_than(TaskIndex task, TimeNs now) {
  arrival_[task] = std::max(arrival_[task], now);
}

void KernelQueue::arrives_on_no_earlier_than(TaskIndex task, std::span<const int> task_devices,
                                             std::span<const int> from, TimeNs now) {
  if (roles_[task] != KernelRole::kQueuesBehind) {
    arrives_no_earlier_than(task, now);
    return;
  }
  std::vector<TimeNs>& at = device_arrival_[task];
  if (at.empty()) at.assign(task_devices.size(), 0);
  MOESIM_CHECK(at.size() == task_devices.size(), "a task's devices changed between two arrivals");
  // Both lists ascend: each of `from` found by binary search after the last one found.
  bool shared = false;
  auto k = task_devices.begin();
  for (int d : from) {
    k = std::lower_bound(k, task_devices.end(), d);
    if (k == task_devices.end()) break;
    if (*k != d) continue;
    TimeNs& a = at[static_cast<std::size_t>(k - task_devices.begin())];
    a = std::max(a, now);
    shared = true;
  }
  if (!shared) arrives_no_earlier_than(task, now);
}

TimeNs KernelQueue::arrival_on(TaskIndex task, std::size_t index) const {
  const auto it = device_arrival_.find(task);
  if (it == device_arrival_.end()) return arrival_[task];
  return std::max(arrival_[task], it->second[index]);
}

bool KernelQueue::defer(TaskIndex task, std::span<const int> devices) {
  // A released task starts: kernels that began while it waited were launched after it.
  if (roles_[task] != KernelRole::kQueuesBehind || waited_[task]) {
    device_arrival_.erase(task);
    return false;
  }
  int holders = 0;
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const TimeNs arrival = arrival_on(task, k);
    for (TaskIndex h : running_[static_cast<std::size_t>(devices[k])]) {
      if (arrival_[h] >= arrival) continue;
      waiters_[h].push_back(task);
      ++holders;
    }
  }
  device_arrival_.erase(task);
  if (holders == 0) return false;
  holders_left_[task] = holders;
  waited_[task] = true;
  return true;
}

void KernelQueue::started(TaskIndex task, std::span<const int> devices) {
  if (roles_[task] != KernelRole::kHoldsSms) return;
  for (int d : devices) running_[static_cast<std::size_t>(d)].push_back(task);
}

void KernelQueue::ended(TaskIndex task, std::span<const int> devices, std::vector<TaskIndex>& released) {
  if (roles_[task] != KernelRole::kHoldsSms) return;
  for (int d : devices) {
    auto& running = running_[static_cast<std::size_t>(d)];
    const auto at = std::find(running.begin(), running.end(), task);
    MOESIM_CHECK(at != running.end(), "a kernel ended that was not running");
    running.erase(at);
  }
  const auto it = waiters_.find(task);
  if (it == waiters_.end()) return;
  for (TaskIndex w : it->second) {
    auto left = holders_left_.find(w);
    MOESIM_CHECK(left != holders_left_.end() && left->second > 0, "a task waited for a kernel twice");
    if (--left->second == 0) {
      holders_left_.erase(left);
      released.push_back(w);
    }
  }
  waiters_.erase(it);
}

}  // namespace moesim
