// What a block holds of what it emitted: a task or a buffer on every simulated rank at once.
#pragma once

#include <vector>

#include "sim/graph/task_graph.h"

namespace moesim {

// One logical task: its index on every simulated rank (a collective has one index, repeated). An
// empty Node is a task the configuration does not have; edges to or from it are skipped.
using Node = std::vector<TaskIndex>;
// One logical buffer: its id on every simulated rank, in simulated_ranks() order. An empty Buf is a
// buffer the configuration does not have; task buffer lists skip it.
using Buf = std::vector<BufferId>;

// `preferred` when the configuration has it, else `fallback` (a decorator's task, such as an
// all-reduce before an all-to-all, or the plain task).
inline const Node& present_or(const Node& preferred, const Node& fallback) {
  return preferred.empty() ? fallback : preferred;
}

// Buffers a task allocates at its start and frees at its end (empty Bufs are skipped, so optional
// buffers can be passed unconditionally).
struct Uses {
  std::vector<Buf> alloc;
  std::vector<Buf> free;
};

}  // namespace moesim
