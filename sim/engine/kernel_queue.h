// KernelQueue: the order in which one GPU hands its SMs to kernels of different streams.
//
// A GPU dispatches the thread blocks of a kernel only after the kernels that reached its queue
// before it have dispatched all of theirs (absent stream priorities). A copy that reaches the
// queue while a GEMM filling the GPU is running therefore waits for the GEMM's last wave, however
// short the copy is. Measured on an H200 (validate/copy_overlap_probe.py,
// validate/results/h200-2026-11-26, call 17): a 1 MiB device-to-device copy of 14 us, issued 40
// us into an 8192^3 GEMM of 1.4 ms, ends within 0.1 ms of the GEMM's end; a cudaMemcpyAsync and a
// copy kernel alike.
//
// When a kernel reaches the queue: the host launches far ahead of the GPU, so a kernel is queued
// behind its own stream's earlier kernels from the start, and reaches the GPU's choice when the
// last of its waits on other streams (events) resolves: its arrival is the latest end of its
// predecessors on other streams (0 when it has none). A collective between GPUs is one kernel
// per GPU, each arriving on its own: on each of its devices, the latest end of its predecessors
// on other streams that ran on that device (a rank's kernel does not wait for another GPU's
// work before it is queued; it waits for its peers inside the kernel, holding its SMs). Measured in the same runs (calls 12 and 14,
// one GPU, 4 chunks): each chunk's combine, released by its fc2 while the next chunk's fc1 (whose
// dispatch ended long before) follows fc2 on the compute stream, waits for that fc1 (~190 us for
// a 10 us copy); the forward's dispatches, queued on their stream before any GEMM was released,
// do not wait.
//
// The engine applies the rule to the tasks the driver marks: kHoldsSms tasks (kernels that fill
// the SMs: GEMMs and memory-bound kernels) and kQueuesBehind tasks (copies and communication that
// run on the SMs: device-to-device copies and every collective). The same rule for a
// communication kernel of a few CTAs, as NCCL's (one CTA of 512 threads per channel), beside bf16
// GEMMs on another stream was measured on the H200 (runtime/bench/sm_share_probe.h,
// validate/results/h200-2026-11-27, calls 12-13): a kernel of 8 to 132 CTAs launched 0.7 ms
// into an 8192^3 GEMM of 1.3 ms started 1.25 ms in, in the GEMM's last wave, and one launched
// into a run of 46 us expert GEMMs waited 16-26 us, at normal and at the highest stream priority
// alike (cuBLAS's Hopper GEMMs keep their CTAs until their tiles are done, so a priority has no
// CTA boundary to take). Priorities do reorder kernels of many short CTAs (the fp32 GEMM there
// gave the high-priority kernel its SMs at the next wave, 0.67 ms earlier): not modelled. A kQueuesBehind task that
// can start while kHoldsSms tasks that arrived before it run on its device (or start at that
// instant) begins to copy when those have all ended; it is issued, and holds its stream, from the
// moment it could start. Approximations: it begins at the end of those kernels rather than in
// their last wave (too late by at most one wave: under 0.1 ms in the measurement); kernels that
// arrive later are not held back by it; equal arrivals do not wait.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/core/units.h"
#include "sim/graph/task.h"

namespace moesim {

enum class KernelRole : std::uint8_t { kNone, kHoldsSms, kQueuesBehind };

class KernelQueue {
 public:
  KernelQueue() = default;
  // One role per task of the graph; `devices` the number of physical devices.
  KernelQueue(std::vector<KernelRole> roles, int devices);

  bool active() const { return !roles_.empty(); }
  // Whether `task` takes part (holds the SMs or queues behind them), holds them, queues.
  bool involves(TaskIndex task) const { return active() && roles_[task] != KernelRole::kNone; }
  bool holds(TaskIndex task) const { return active() && roles_[task] == KernelRole::kHoldsSms; }
  bool queues(TaskIndex task) const { return active() && roles_[task] == KernelRole::kQueuesBehind; }
  // `task` reaches the queue of each of its GPUs no earlier than `now`: a predecessor on another
  // stream ended (a task on one device), or (the host model, sim/engine/host_issue.h) its host
  // launched it.
  void arrives_no_earlier_than(TaskIndex task, TimeNs now);
  // A predecessor of `task` (on `task_devices`, ascending, two or more) on another stream ended
  // at `now` on `from` (ascending), or its host on `from` launched it then: `task` reaches the
  // queues of the devices of both no earlier. Where they share no device (no graph builds such an
  // edge), or `task` holds the SMs (a kernel of one device), on every device.
  void arrives_on_no_earlier_than(TaskIndex task, std::span<const int> task_devices, std::span<const int> from,
                                  TimeNs now);
  // `task` (on `devices`) starts now: a kHoldsSms task holds the SMs of its devices until it ends.
  void started(TaskIndex task, std::span<const int> devices);
  // `task` (on `devices`, ascending) can start: true when it must wait for kernels that arrived
  // on one of its devices before it did and run there (those started at this instant included);
  // they release it when the last one ends.
  bool defer(TaskIndex task, std::span<const int> devices);
  // Whether `task` was held back (and so was issued before it began).
  bool waited(TaskIndex task) const { return waited_[task]; }
  // `task` ended: appends the waiting tasks it was the last to hold back.
  void ended(TaskIndex task, std::span<const int> devices, std::vector<TaskIndex>& released);

 private:
  std::vector<KernelRole> roles_;
  // `task`'s arrival on the device at `index` of its ascending devices.
  TimeNs arrival_on(TaskIndex task, std::size_t index) const;

  std::vector<TimeNs> arrival_;                  // by task: on every device
  // Tasks on several devices: the arrival on each, in the order of their ascending devices.
  std::unordered_map<TaskIndex, std::vector<TimeNs>> device_arrival_;
  std::vector<bool> waited_;                     // by task: it has been held back once
  std::vector<std::vector<TaskIndex>> running_;  // kHoldsSms tasks running, by device
  std::unordered_map<TaskIndex, std::vector<TaskIndex>> waiters_;  // by the kernel they wait for
  std::unordered_map<TaskIndex, int> holders_left_;               // by waiting task
};

}  // namespace moesim
