// MemoryTracker: device and pinned-host memory over simulated time, per rank.
//
// An engine observer (design.md lesson 6): a task's buffers are allocated when it starts and freed
// when it ends; resident buffers count from time 0. At equal times the engine reports ends before
// starts, so a buffer freed and another allocated at the same instant never count together. The
// tracker keeps, per rank, the device peak with its time, the breakdown by category and the set of
// live buffers at that peak, the maximum each category reached on its own, the pinned-host peak,
// and a timeline for counter tracks in traces.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/core/units.h"
#include "sim/engine/observer.h"
#include "sim/graph/task_graph.h"

namespace moesim {

struct MemorySample {
  TimeNs time_ns = 0;
  std::int64_t device_bytes = 0;
  std::int64_t host_pinned_bytes = 0;
};

struct RankMemory {
  int rank = 0;
  std::int64_t peak_device_bytes = 0;
  TimeNs peak_time_ns = 0;
  std::array<std::int64_t, kNumMemoryCategories> at_peak_bytes{};   // breakdown of the peak
  std::array<std::int64_t, kNumMemoryCategories> max_bytes{};       // each category's own maximum
  std::vector<BufferId> live_at_peak;                                // device buffers, ascending id
  std::int64_t peak_host_pinned_bytes = 0;
  std::vector<MemorySample> timeline;  // one sample per change, in time order
};

class MemoryTracker final : public EngineObserver {
 public:
  // The graph must outlive the tracker.
  explicit MemoryTracker(const TaskGraph& graph);

  void on_task_start(TaskIndex task, TimeNs now) override;
  void on_task_end(TaskIndex task, TimeNs now) override;

  // Results for every simulated rank, in rank order. Throws InternalError if a buffer was freed
  // before it was allocated.
  const std::vector<RankMemory>& ranks() const { return ranks_; }
  const RankMemory& rank(int r) const;

 private:
  void change(BufferId id, bool allocate, TimeNs now, const std::string& task_id);
  void record(RankMemory& m, std::size_t slot, TimeNs now);

  const TaskGraph& graph_;
  std::vector<RankMemory> ranks_;
  std::vector<int> slot_of_rank_;                 // rank -> index in ranks_ (-1 if not simulated)
  std::vector<std::array<std::int64_t, kNumMemoryCategories>> current_;  // per slot
  std::vector<std::vector<BufferId>> buffers_of_slot_;  // per slot, its rank's buffers, ascending id
  std::vector<std::uint32_t> local_index_;        // per buffer id, its place in its rank's list
  std::vector<std::vector<bool>> live_;           // per slot, per buffer of its rank
  std::vector<bool> allocated_once_;
};

}  // namespace moesim
