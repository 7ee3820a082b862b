#include "runtime/exec/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <tuple>

#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"

namespace moesim::runtime {

const BufferPlacement* MemoryPlan::find(BufferId id) const {
  const auto it = std::lower_bound(placements.begin(), placements.end(), id,
                                   [](const BufferPlacement& p, BufferId v) { return p.buffer < v; });
  return it == placements.end() || it->buffer != id ? nullptr : &*it;
}

const BufferPlacement& MemoryPlan::placement(BufferId id) const {
  const BufferPlacement* p = find(id);
  if (p == nullptr)
    throw InputError("memory plan: buffer " + std::to_string(id) + " is not rank " + std::to_string(rank) + "'s");
  return *p;
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

// The rank's buffers, indexed locally 0..size()-1 in ascending id.
struct RankBuffers {
  std::vector<BufferId> ids;
  std::vector<std::int64_t> local_of;  // by BufferId: the local index, or -1 for other ranks'
  std::vector<std::int64_t> aligned;   // footprint rounded up to the alignment
  std::vector<bool> host;              // in the host arena
  std::size_t size() const { return ids.size(); }
  int side(std::size_t b) const { return host[b] ? 1 : 0; }  // 0 device, 1 host
};

RankBuffers rank_buffers(const TaskGraph& graph, int rank, std::int64_t alignment) {
  RankBuffers bufs;
  bufs.local_of.assign(graph.num_buffers(), -1);
  for (BufferId b = 0; b < graph.num_buffers(); ++b)
    if (graph.buffer(b).rank == rank) {
      bufs.local_of[b] = static_cast<std::int64_t>(bufs.ids.size());
      bufs.ids.push_back(b);
      bufs.aligned.push_back((graph.buffer(b).bytes + alignment - 1) / alignment * alignment);
      bufs.host.push_back(graph.buffer(b).on_host());
    }
  return bufs;
}

std::vector<bool> kept_buffers(const TaskGraph& graph, const RankBuffers& bufs, const std::vector<BufferId>& keep,
                               int rank) {
  std::vector<bool> kept(bufs.size(), false);
  for (BufferId b : keep) {
    if (b >= graph.num_buffers() || bufs.local_of[b] < 0)
      throw InputError("memory plan: a buffer to keep is not one of rank " + std::to_string(rank) + "'s");
    kept[static_cast<std::size_t>(bufs.local_of[b])] = true;
  }
  return kept;
}

// Each buffer's allocating and freeing task (kStepBoundary: none), and what each task frees.
struct Lifetimes {
  std::vector<std::int64_t> alloc_task, free_task;
  std::vector<BufferSet> freed_by;  // by task
};

Lifetimes buffer_lifetimes(const TaskGraph& graph, const RankBuffers& bufs, const std::vector<bool>& kept) {
  const std::size_t nb = bufs.size();
  Lifetimes life{std::vector<std::int64_t>(nb, kStepBoundary), std::vector<std::int64_t>(nb, kStepBoundary),
                 std::vector<BufferSet>(graph.num_tasks(), BufferSet(nb))};
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    for (BufferId b : graph.task(i).allocates)
      if (bufs.local_of[b] >= 0) life.alloc_task[static_cast<std::size_t>(bufs.local_of[b])] = i;
    for (BufferId b : graph.task(i).frees)
      if (bufs.local_of[b] >= 0 && !kept[static_cast<std::size_t>(bufs.local_of[b])]) {
        life.free_task[static_cast<std::size_t>(bufs.local_of[b])] = i;
        life.freed_by[i].add(static_cast<std::size_t>(bufs.local_of[b]));
      }
  }
  return life;
}

// Resident buffers live the whole step, whatever lists them; any other buffer's freeing task
// must follow its allocating task in the graph.
void settle_lifetimes(const TaskGraph& graph, const RankBuffers& bufs, Lifetimes& life) {
  for (std::size_t b = 0; b < bufs.size(); ++b) {
    const Buffer& buf = graph.buffer(bufs.ids[b]);
    std::int64_t& alloc_at = life.alloc_task[b];
    std::int64_t& free_at = life.free_task[b];
    if (buf.resident) alloc_at = free_at = kStepBoundary;
    if (alloc_at >= 0 && free_at >= 0 && alloc_at != free_at &&
        !reaches(graph, static_cast<TaskIndex>(alloc_at), static_cast<TaskIndex>(free_at)))
      throw InternalError("memory plan: buffer " + buf.name + " is freed by " +
                          task_label(graph, static_cast<TaskIndex>(free_at)) +
                          ", which does not follow its allocating task " +
                          task_label(graph, static_cast<TaskIndex>(alloc_at)));
  }
}

// before[i]: the buffers whose freeing task strictly precedes task i (a path of >= 1 edge).
std::vector<BufferSet> freed_before(const TaskGraph& graph, const std::vector<TaskIndex>& order,
                                    const Lifetimes& life, std::size_t nb) {
  std::vector<BufferSet> before(graph.num_tasks(), BufferSet(nb));
  for (TaskIndex i : order) {
    for (TaskIndex p : graph.predecessors(i)) {
      before[i].merge(before[p]);
      before[i].merge(life.freed_by[p]);
    }
  }
  return before;
}

// First fit in a given order: offsets, and the arena size per side (0 device, 1 host).
struct Fit {
  std::vector<std::int64_t> offset;
  std::int64_t arena[2] = {0, 0};
};

class ArenaPacker {
 public:
  ArenaPacker(const RankBuffers& bufs, const Lifetimes& life, const std::vector<BufferSet>& before)
      : bufs_(bufs), life_(life), before_(before) {}

  Fit first_fit(const std::vector<std::size_t>& place_order) const {
    Fit fit;
    fit.offset.assign(bufs_.size(), 0);
    std::vector<std::size_t> placed;
    for (std::size_t b : place_order) {
      std::vector<std::pair<std::int64_t, std::int64_t>> taken;  // [begin, end) of conflicting buffers
      for (std::size_t a : placed)
        if (bufs_.host[a] == bufs_.host[b] && conflict(a, b))
          taken.emplace_back(fit.offset[a], fit.offset[a] + bufs_.aligned[a]);
      std::sort(taken.begin(), taken.end());
      std::int64_t at = 0;
      for (const auto& [begin, end] : taken) {
        if (at + bufs_.aligned[b] <= begin) break;  // the gap below `begin` fits
        at = std::max(at, end);
      }
      fit.offset[b] = at;
      placed.push_back(b);
      fit.arena[bufs_.side(b)] = std::max(fit.arena[bufs_.side(b)], at + bufs_.aligned[b]);
    }
    return fit;
  }

 private:
  bool ordered(std::size_t a, std::size_t b) const {  // a's lifetime ends before b's begins
    return life_.alloc_task[b] >= 0 && before_[static_cast<std::size_t>(life_.alloc_task[b])].has(a);
  }
  bool conflict(std::size_t a, std::size_t b) const { return !ordered(a, b) && !ordered(b, a); }

  const RankBuffers& bufs_;
  const Lifetimes& life_;
  const std::vector<BufferSet>& before_;
};

// Two orders: by start (lifetimes open in issue order, like a stack allocator would see them)
// and by size (large buffers first leave fewer unusable gaps).
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> placement_orders(
    const RankBuffers& bufs, const Lifetimes& life, const std::vector<std::int64_t>& position) {
  std::vector<std::size_t> by_start(bufs.size());
  for (std::size_t b = 0; b < bufs.size(); ++b) by_start[b] = b;
  const auto start_of = [&](std::size_t b) {
    return life.alloc_task[b] >= 0 ? position[static_cast<std::size_t>(life.alloc_task[b])] : std::int64_t{-1};
  };
  const auto& aligned = bufs.aligned;
  const auto& ids = bufs.ids;
  std::vector<std::size_t> by_size = by_start;
  std::sort(by_start.begin(), by_start.end(), [&](std::size_t a, std::size_t b) {
    return std::make_tuple(start_of(a), -aligned[a], ids[a]) < std::make_tuple(start_of(b), -aligned[b], ids[b]);
  });
  std::sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) {
    return std::make_tuple(-aligned[a], start_of(a), ids[a]) < std::make_tuple(-aligned[b], start_of(b), ids[b]);
  });
  return {by_start, by_size};
}

// Each arena keeps the smaller of the two fits; returns every buffer's offset in its arena.
std::vector<std::int64_t> choose_fits(const RankBuffers& bufs, const Fit (&fits)[2], MemoryPlan& plan) {
  std::vector<std::int64_t> offset(bufs.size(), 0);
  for (int side = 0; side < 2; ++side) {
    const Fit& best = fits[1].arena[side] < fits[0].arena[side] ? fits[1] : fits[0];
    ArenaSummary& arena = side == 1 ? plan.host : plan.device;
    arena.arena_bytes = best.arena[side];
    for (std::size_t b = 0; b < bufs.size(); ++b)
      if (bufs.side(b) == side) {
        offset[b] = best.offset[b];
        arena.total_bytes += bufs.aligned[b];
      }
  }
  return offset;
}

// Live bytes when the tasks run one at a time in issue order.
void sequential_peaks(const TaskGraph& graph, const RankBuffers& bufs, const Lifetimes& life,
                      const std::vector<TaskIndex>& order, MemoryPlan& plan) {
  std::int64_t live[2] = {0, 0};
  for (std::size_t b = 0; b < bufs.size(); ++b)
    if (life.alloc_task[b] < 0) live[bufs.side(b)] += bufs.aligned[b];
  plan.device.sequential_peak_bytes = live[0];
  plan.host.sequential_peak_bytes = live[1];
  for (TaskIndex i : order) {
    for (BufferId id : graph.task(i).allocates) {
      const std::int64_t b = bufs.local_of[id];
      if (b < 0 || life.alloc_task[static_cast<std::size_t>(b)] < 0) continue;
      const int side = bufs.side(static_cast<std::size_t>(b));
      live[side] += bufs.aligned[static_cast<std::size_t>(b)];
      ArenaSummary& arena = side == 1 ? plan.host : plan.device;
      arena.sequential_peak_bytes = std::max(arena.sequential_peak_bytes, live[side]);
    }
    for (BufferId id : graph.task(i).frees) {
      const std::int64_t b = bufs.local_of[id];
      if (b < 0 || life.free_task[static_cast<std::size_t>(b)] < 0) continue;
      live[bufs.side(static_cast<std::size_t>(b))] -= bufs.aligned[static_cast<std::size_t>(b)];
    }
  }
}

}  // namespace

MemoryPlan plan_memory(const TaskGraph& graph, int rank, std::int64_t alignment, const std::vector<BufferId>& keep) {
  if (!graph.is_simulated(rank))
    throw InputError("memory plan: rank " + std::to_string(rank) + " is not simulated by the graph");
  if (alignment <= 0) throw InputError("memory plan: alignment must be positive, got " + std::to_string(alignment));
  MemoryPlan plan;
  plan.rank = rank;
  plan.alignment = alignment;

  const RankBuffers bufs = rank_buffers(graph, rank, alignment);
  Lifetimes life = buffer_lifetimes(graph, bufs, kept_buffers(graph, bufs, keep, rank));
  settle_lifetimes(graph, bufs, life);
  const std::vector<TaskIndex> order = topological_order(graph);
  std::vector<std::int64_t> position(graph.num_tasks());
  for (std::size_t k = 0; k < order.size(); ++k) position[order[k]] = static_cast<std::int64_t>(k);
  const std::vector<BufferSet> before = freed_before(graph, order, life, bufs.size());

  const ArenaPacker packer(bufs, life, before);
  const auto [by_start, by_size] = placement_orders(bufs, life, position);
  const Fit fits[2] = {packer.first_fit(by_start), packer.first_fit(by_size)};
  const std::vector<std::int64_t> offset = choose_fits(bufs, fits, plan);
  sequential_peaks(graph, bufs, life, order, plan);

  for (std::size_t b = 0; b < bufs.size(); ++b)
    plan.placements.push_back(
        BufferPlacement{bufs.ids[b], bufs.host[b], offset[b], graph.buffer(bufs.ids[b]).bytes});
  return plan;
}

}  // namespace moesim::runtime
