// Buffer-pool memory plan: every buffer of one rank gets a fixed offset in one device arena (one
// cudaMalloc) or one pinned host arena (one cudaMallocHost, for host_pinned buffers), allocated
// once before the step; computed on the host without a GPU.
//
// Lifetimes: a buffer lives from the start of the task that allocates it (from the step's start
// when it is resident or no task allocates it) to the end of the task that frees it (to the step's
// end when none does), as in the simulator's MemoryTracker. Two buffers may share bytes only if
// one's lifetime happens-before the other's: the freeing task of A reaches the allocating task of
// B by a path of the graph (A's freer != B's allocator). Overlap of the two lifetimes in one
// topological order is not enough: tasks on different streams that no path orders may run in
// either order, or at once, on a GPU. Every path is enforced by the executor (stream order,
// events, collectives), so the plan is safe for every schedule the graph allows.
//
// Placement: first fit, each buffer at the lowest offset (a multiple of `alignment`) where it
// overlaps no already placed buffer it conflicts with, run in two orders (by the issue position
// of the allocating task, step-start buffers first; and largest first); each arena keeps the
// smaller result. Finding the smallest arena is NP-hard (dynamic storage allocation); first fit
// is the usual heuristic of static memory planners.
//
// Guarantees (tested on the builder's graphs):
//   safety       buffers whose byte ranges overlap are ordered by happens-before;
//   lower bound  arena >= the live bytes at any instant of any execution the graph allows, hence
//                >= the MemoryTracker's peak of a simulation, and >= sequential_peak_bytes (the
//                peak when the tasks run one at a time in issue order);
//   upper bound  arena <= total_bytes (every buffer apart).
// Measured, not guaranteed (tests/runtime/exec/memory_plan_test.cc: 2 models, one with a shared
// expert, x 5 strategies x 3 orders x n in {1, 2, 4}, two layers): the arena equals the heaviest
// set of pairwise conflicting buffers, the least any safe static plan needs, in 78 of 90 cases
// (all 60 with n > 1), and exceeds it by at most 1.03% (first fit's fragmentation, all at n = 1).
// It can exceed the tracker's peak: the graph lets the GPU overlap more than the simulated timing
// happened to (up to 2.1% here).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/graph/task_graph.h"

namespace moesim::runtime {

inline constexpr std::int64_t kDefaultArenaAlignment = 256;  // cudaMalloc's alignment

struct BufferPlacement {
  BufferId buffer = 0;
  bool host = false;          // in the pinned host arena
  std::int64_t offset = 0;    // bytes from the arena's base
  std::int64_t bytes = 0;     // the buffer's size (its footprint is rounded up to the alignment)
};

struct ArenaSummary {
  std::int64_t arena_bytes = 0;           // the size to allocate
  std::int64_t sequential_peak_bytes = 0; // live peak when tasks run one at a time in issue order
  std::int64_t total_bytes = 0;           // sum of aligned buffer sizes (no reuse at all)
};

struct MemoryPlan {
  int rank = 0;
  std::int64_t alignment = kDefaultArenaAlignment;
  ArenaSummary device;
  ArenaSummary host;
  std::vector<BufferPlacement> placements;  // every buffer of the rank, ascending id

  // Throws InputError for a buffer that is not the rank's.
  const BufferPlacement& placement(BufferId id) const;
  bool holds(BufferId id) const { return find(id) != nullptr; }  // whether the buffer is the rank's

 private:
  const BufferPlacement* find(BufferId id) const;
};

// Throws InputError when `rank` is not simulated or alignment is not positive, InternalError when
// a buffer's allocating task does not precede its freeing task. The buffers in `keep` live to the
// step's end whatever task frees them: their bytes are read after the step (the executor's
// results), so no later buffer may share them.
MemoryPlan plan_memory(const TaskGraph& graph, int rank, std::int64_t alignment = kDefaultArenaAlignment,
                       const std::vector<BufferId>& keep = {});

}  // namespace moesim::runtime
