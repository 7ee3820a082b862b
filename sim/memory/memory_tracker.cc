#include "sim/memory/memory_tracker.h"

#include "sim/core/checked_math.h"
#include "sim/core/error.h"

namespace moesim {

MemoryTracker::MemoryTracker(const TaskGraph& graph)
    : graph_(graph), slot_of_rank_(static_cast<std::size_t>(graph.world_size()), -1) {
  for (int r : graph.simulated_ranks()) {
    slot_of_rank_[r] = static_cast<int>(ranks_.size());
    RankMemory m;
    m.rank = r;
    ranks_.push_back(m);
  }
  current_.resize(ranks_.size());
  // Each rank's own buffers, so that a new peak scans them and not every rank's (an every-rank
  // simulation of N ranks would otherwise cost N x all buffers in time and bits).
  buffers_of_slot_.resize(ranks_.size());
  local_index_.resize(graph.num_buffers());
  for (BufferId id = 0; id < graph.num_buffers(); ++id) {
    const int rank = graph.buffer(id).rank;
    MOESIM_CHECK(rank >= 0 && rank < graph.world_size() && slot_of_rank_[static_cast<std::size_t>(rank)] >= 0,
                 "buffer '" + graph.buffer(id).name + "' belongs to rank " + std::to_string(rank) +
                     ", which is not simulated");
    auto& mine = buffers_of_slot_[static_cast<std::size_t>(slot_of_rank_[static_cast<std::size_t>(rank)])];
    local_index_[id] = static_cast<std::uint32_t>(mine.size());
    mine.push_back(id);
  }
  live_.resize(ranks_.size());
  for (std::size_t slot = 0; slot < ranks_.size(); ++slot) live_[slot].assign(buffers_of_slot_[slot].size(), false);
  allocated_once_.assign(graph.num_buffers(), false);
  for (BufferId id = 0; id < graph.num_buffers(); ++id) {
    if (graph.buffer(id).resident) change(id, true, 0, "(resident)");
  }
}

const RankMemory& MemoryTracker::rank(int r) const {
  MOESIM_CHECK(r >= 0 && r < static_cast<int>(slot_of_rank_.size()) && slot_of_rank_[r] >= 0,
               "rank " + std::to_string(r) + " is not simulated");
  return ranks_[slot_of_rank_[r]];
}

void MemoryTracker::on_task_start(TaskIndex task, TimeNs now) {
  const Task& t = graph_.task(task);
  for (BufferId id : t.allocates) change(id, true, now, t.id);
}

void MemoryTracker::on_task_end(TaskIndex task, TimeNs now) {
  const Task& t = graph_.task(task);
  for (BufferId id : t.frees) change(id, false, now, t.id);
}

void MemoryTracker::change(BufferId id, bool allocate, TimeNs now, const std::string& task_id) {
  const Buffer& b = graph_.buffer(id);
  const std::size_t slot = static_cast<std::size_t>(slot_of_rank_[b.rank]);
  if (allocate) {
    MOESIM_CHECK(!allocated_once_[id], "buffer '" + b.name + "' allocated twice (by '" + task_id + "')");
    allocated_once_[id] = true;
  } else {
    MOESIM_CHECK(live_[slot][local_index_[id]], "buffer '" + b.name + "' freed by '" + task_id +
                                                    "' while not allocated (is the free ordered after the allocation?)");
  }
  live_[slot][local_index_[id]] = allocate;
  auto& cur = current_[slot][static_cast<int>(b.category)];
  cur = allocate ? checked_add(cur, b.bytes) : cur - b.bytes;
  record(ranks_[slot], slot, now);
}

void MemoryTracker::record(RankMemory& m, std::size_t slot, TimeNs now) {
  const auto& cur = current_[slot];
  std::int64_t device = 0;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    if (c != static_cast<int>(MemoryCategory::kHostPinned)) device += cur[c];
    m.max_bytes[c] = std::max(m.max_bytes[c], cur[c]);
  }
  const std::int64_t host = cur[static_cast<int>(MemoryCategory::kHostPinned)];
  m.peak_host_pinned_bytes = std::max(m.peak_host_pinned_bytes, host);
  if (device > m.peak_device_bytes) {
    m.peak_device_bytes = device;
    m.peak_time_ns = now;
    m.at_peak_bytes = cur;
    m.live_at_peak.clear();
    const std::vector<BufferId>& mine = buffers_of_slot_[slot];
    for (std::size_t i = 0; i < mine.size(); ++i)
      if (live_[slot][i] && !graph_.buffer(mine[i]).on_host()) m.live_at_peak.push_back(mine[i]);
  }
  // Several changes at one instant collapse into one sample: the state after all of them.
  if (!m.timeline.empty() && m.timeline.back().time_ns == now) {
    m.timeline.back().device_bytes = device;
    m.timeline.back().host_pinned_bytes = host;
  } else {
    m.timeline.push_back({now, device, host});
  }
}

}  // namespace moesim
