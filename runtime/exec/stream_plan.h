// Stream and event plan: how one rank's part of a TaskGraph lowers onto CUDA streams and events,
// computed on the host without a GPU (design.md: runtime/exec; issue 6 design note).
//
// - One stream per StreamClass the rank uses (compute, comm.dispatch, comm.combine, copy.d2h,
//   copy.h2d), numbered in class order: `streams[i]` is the class of cudaStream i.
// - Host issue order: the rank's tasks in the graph's deterministic topological order (which keeps
//   each stream's order). The executor walks `tasks` once per step: for each, cudaStreamWaitEvent
//   on every event in `waits`, launch the task on `stream`, then cudaEventRecord(`records`). An
//   event is recorded before any wait on it is issued, because the issue order is topological.
// - A dependency on a task of the same stream needs nothing (in-order streams). A dependency on
//   another stream of the rank becomes an event recorded after the producer and waited on before
//   the consumer, unless it is already implied: each task carries a vector clock (per stream of
//   the rank, the last position known complete when it starts), inherited from its stream
//   predecessor and from the producers it waits on. Producers are considered latest-first (by
//   issue position), so a wait kept is never implied by one added after it: the waits of a task
//   are a minimal set under this knowledge (a transitive reduction per stream).
// - A dependency on another rank's task is fulfilled by the collective it leads into (every member
//   enters the collective only after its own producers); one that does not lead into a collective
//   cannot be lowered and is rejected.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/graph/task_graph.h"

namespace moesim::runtime {

struct PlannedTask {
  TaskIndex task = 0;
  int stream = 0;           // index into StreamPlan::streams
  std::int64_t position = 0;  // index of the task on its stream
  std::vector<int> waits;   // events to wait on before launching, ascending
  int records = -1;         // event recorded right after launching, or -1
};

struct PlannedEvent {
  TaskIndex after = 0;  // the producer task
  int stream = 0;       // the stream it is recorded on (the producer's)
};

struct StreamPlan {
  int rank = 0;
  std::vector<StreamClass> streams;                   // stream index -> class, in class order
  std::array<int, kNumStreamClasses> stream_of_class{};  // class -> stream index, -1 when unused
  std::vector<PlannedTask> tasks;                     // host issue order
  std::vector<PlannedEvent> events;                   // by event index
  std::int64_t cross_stream_dependencies = 0;         // same-rank edges between streams, before reduction
  std::int64_t num_waits() const;
};

// Throws InputError when `rank` is not simulated by the graph, or a task of the rank depends on
// another rank's task other than through a collective.
StreamPlan plan_streams(const TaskGraph& graph, int rank);

}  // namespace moesim::runtime
