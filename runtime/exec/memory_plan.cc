#include "runtime/exec/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <tuple>

#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"

namespace moesim::runtime {

const BufferPlacement& MemoryPlan::placement(BufferId id) const {
  const auto it = std::lower_bound(placements.begin(), placements.end(), id,
                                   [](const BufferPlacement& p, BufferId v) { return p.buffer < v; });
  if (it == placements.end() || it->buffer != id)
    throw InputError("memory plan: buffer " + std::to_string(id) + " is not rank " + std::to_string(rank) + "'s");
  return *it;
}

namespace {

// A set of the rank's buffers (by local index) as a bitset.
class BufferSet {
 public:
  explicit BufferSet(std::size_t n = 0) : words_((n + 63) / 64, 0) {}
  void add(std::size_t i) { words_[i / 64] |= std::uint64_t{1} << (i % 64); }
  bool has(std::size_t i) const { return ((words_[i / 64] >> (i % 64)) & 1U) != 0; }
  void merge(const BufferSet& o) {
    for (std::size_t w = 0; w < words_.size(); ++w) words_[w] |= o.words_[w];
  }

 private:
  std::vector<std::uint64_t> words_;
};

constexpr std::int64_t kStepBoundary = -1;  // no allocating (freeing) task: the step's start (end)

bool reaches(const TaskGraph& graph, TaskIndex from, TaskIndex to) {
  std::vector<bool> seen(graph.num_tasks(), false);
  std::deque<TaskIndex> queue{from};
  seen[from] = true;
  while (!queue.empty()) {
    const TaskIndex i = queue.front();
    queue.pop_front();
    if (i == to) return true;
    for (TaskIndex s : graph.successors(i))
      if (!seen[s]) {
        seen[s] = true;
        queue.push_back(s);
      }
  }
  return false;
}

}  // namespace

MemoryPlan plan_memory(const TaskGraph& graph, int rank, std::int64_t alignment, const std::vector<BufferId>& keep) {
  if (!graph.is_simulated(rank))
    throw InputError("memory plan: rank " + std::to_string(rank) + " is not simulated by the graph");
  if (alignment <= 0) throw InputError("memory plan: alignment must be positive, got " + std::to_string(alignment));
  MemoryPlan plan;
  plan.rank = rank;
  plan.alignment = alignment;

  std::vector<BufferId> ids;
  std::vector<std::int64_t> local_of(graph.num_buffers(), -1);
  for (BufferId b = 0; b < graph.num_buffers(); ++b)
    if (graph.buffer(b).rank == rank) {
      local_of[b] = static_cast<std::int64_t>(ids.size());
      ids.push_back(b);
    }
  const std::size_t nb = ids.size();
  const auto aligned = [&](std::size_t i) {
    const std::int64_t bytes = graph.buffer(ids[i]).bytes;
    return (bytes + alignment - 1) / alignment * alignment;
  };

  std::vector<bool> kept(nb, false);
  for (BufferId b : keep) {
    if (b >= graph.num_buffers() || local_of[b] < 0)
      throw InputError("memory plan: a buffer to keep is not one of rank " + std::to_string(rank) + "'s");
    kept[static_cast<std::size_t>(local_of[b])] = true;
  }
  std::vector<std::int64_t> alloc_task(nb, kStepBoundary), free_task(nb, kStepBoundary);
  std::vector<BufferSet> freed_by(graph.num_tasks(), BufferSet(nb));
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    for (BufferId b : graph.task(i).allocates)
      if (local_of[b] >= 0) alloc_task[static_cast<std::size_t>(local_of[b])] = i;
    for (BufferId b : graph.task(i).frees)
      if (local_of[b] >= 0 && !kept[static_cast<std::size_t>(local_of[b])]) {
        free_task[static_cast<std::size_t>(local_of[b])] = i;
        freed_by[i].add(static_cast<std::size_t>(local_of[b]));
      }
  }
  for (std::size_t b = 0; b < nb; ++b) {
    const Buffer& buf = graph.buffer(ids[b]);
    if (buf.resident) alloc_task[b] = free_task[b] = kStepBoundary;  // whole step, whatever lists it
    if (alloc_task[b] >= 0 && free_task[b] >= 0 && alloc_task[b] != free_task[b] &&
        !reaches(graph, static_cast<TaskIndex>(alloc_task[b]), static_cast<TaskIndex>(free_task[b])))
      throw InternalError("memory plan: buffer " + buf.name + " is freed by " +
                          task_label(graph, static_cast<TaskIndex>(free_task[b])) +
                          ", which does not follow its allocating task " +
                          task_label(graph, static_cast<TaskIndex>(alloc_task[b])));
  }

  // before[i]: the buffers whose freeing task strictly precedes task i (a path of >= 1 edge).
  const std::vector<TaskIndex> order = topological_order(graph);
  std::vector<std::int64_t> position(graph.num_tasks());
  std::vector<BufferSet> before(graph.num_tasks(), BufferSet(nb));
  for (std::size_t k = 0; k < order.size(); ++k) {
    const TaskIndex i = order[k];
    position[i] = static_cast<std::int64_t>(k);
    for (TaskIndex p : graph.predecessors(i)) {
      before[i].merge(before[p]);
      before[i].merge(freed_by[p]);
    }
  }
  const auto ordered = [&](std::size_t a, std::size_t b) {  // a's lifetime ends before b's begins
    return alloc_task[b] >= 0 && before[static_cast<std::size_t>(alloc_task[b])].has(a);
  };
  const auto conflict = [&](std::size_t a, std::size_t b) { return !ordered(a, b) && !ordered(b, a); };

  // First fit in a given order: offsets, and the arena size per side (0 device, 1 host).
  struct Fit {
    std::vector<std::int64_t> offset;
    std::int64_t arena[2] = {0, 0};
  };
  const auto first_fit = [&](const std::vector<std::size_t>& place_order) {
    Fit fit;
    fit.offset.assign(nb, 0);
    std::vector<std::size_t> placed;
    for (std::size_t b : place_order) {
      const bool host = graph.buffer(ids[b]).on_host();
      std::vector<std::pair<std::int64_t, std::int64_t>> taken;  // [begin, end) of conflicting buffers
      for (std::size_t a : placed)
        if (graph.buffer(ids[a]).on_host() == host && conflict(a, b))
          taken.emplace_back(fit.offset[a], fit.offset[a] + aligned(a));
      std::sort(taken.begin(), taken.end());
      std::int64_t at = 0;
      for (const auto& [begin, end] : taken) {
        if (at + aligned(b) <= begin) break;  // the gap below `begin` fits
        at = std::max(at, end);
      }
      fit.offset[b] = at;
      placed.push_back(b);
      fit.arena[host ? 1 : 0] = std::max(fit.arena[host ? 1 : 0], at + aligned(b));
    }
    return fit;
  };
  // Two orders: by start (lifetimes open in issue order, like a stack allocator would see them)
  // and by size (large buffers first leave fewer unusable gaps); each arena keeps the smaller.
  std::vector<std::size_t> by_start(nb);
  for (std::size_t b = 0; b < nb; ++b) by_start[b] = b;
  const auto start_of = [&](std::size_t b) {
    return alloc_task[b] >= 0 ? position[static_cast<std::size_t>(alloc_task[b])] : std::int64_t{-1};
  };
  std::vector<std::size_t> by_size = by_start;
  std::sort(by_start.begin(), by_start.end(), [&](std::size_t a, std::size_t b) {
    return std::make_tuple(start_of(a), -aligned(a), ids[a]) < std::make_tuple(start_of(b), -aligned(b), ids[b]);
  });
  std::sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) {
    return std::make_tuple(-aligned(a), start_of(a), ids[a]) < std::make_tuple(-aligned(b), start_of(b), ids[b]);
  });
  const Fit fits[2] = {first_fit(by_start), first_fit(by_size)};
  std::vector<std::int64_t> offset(nb, 0);
  for (int side = 0; side < 2; ++side) {
    const Fit& best = fits[1].arena[side] < fits[0].arena[side] ? fits[1] : fits[0];
    ArenaSummary& arena = side == 1 ? plan.host : plan.device;
    arena.arena_bytes = best.arena[side];
    for (std::size_t b = 0; b < nb; ++b)
      if (graph.buffer(ids[b]).on_host() == (side == 1)) {
        offset[b] = best.offset[b];
        arena.total_bytes += aligned(b);
      }
  }

  // Live bytes when the tasks run one at a time in issue order.
  std::int64_t live[2] = {0, 0};
  for (std::size_t b = 0; b < nb; ++b)
    if (alloc_task[b] < 0) live[graph.buffer(ids[b]).on_host() ? 1 : 0] += aligned(b);
  plan.device.sequential_peak_bytes = live[0];
  plan.host.sequential_peak_bytes = live[1];
  for (TaskIndex i : order) {
    for (BufferId id : graph.task(i).allocates) {
      const std::int64_t b = local_of[id];
      if (b < 0 || alloc_task[static_cast<std::size_t>(b)] < 0) continue;
      const bool host = graph.buffer(id).on_host();
      live[host ? 1 : 0] += aligned(static_cast<std::size_t>(b));
      ArenaSummary& arena = host ? plan.host : plan.device;
      arena.sequential_peak_bytes = std::max(arena.sequential_peak_bytes, live[host ? 1 : 0]);
    }
    for (BufferId id : graph.task(i).frees) {
      const std::int64_t b = local_of[id];
      if (b < 0 || free_task[static_cast<std::size_t>(b)] < 0) continue;
      live[graph.buffer(id).on_host() ? 1 : 0] -= aligned(static_cast<std::size_t>(b));
    }
  }

  for (std::size_t b = 0; b < nb; ++b)
    plan.placements.push_back(BufferPlacement{ids[b], graph.buffer(ids[b]).on_host(), offset[b], graph.buffer(ids[b]).bytes});
  return plan;
}

}  // namespace moesim::runtime
