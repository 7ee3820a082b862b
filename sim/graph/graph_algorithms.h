// Algorithms on the task graph: cycle detection, deterministic topological order, critical path.
//
// Every edge kind (data, stream, reuse) counts: a stream edge is as binding as a data edge. Order
// and tie-breaks depend only on task indices, so results are reproducible (design.md section 3).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/graph/task_graph.h"

namespace moesim {

// A cycle as task indices, the first index repeated at the end (a -> b -> c -> a), or nullopt
// when the graph is acyclic. The cycle found is the first one a depth-first search from the
// smallest index meets.
std::optional<std::vector<TaskIndex>> find_cycle(const TaskGraph& graph);

// A readable label of a task: its id, with "@rank" appended when the graph simulates several
// ranks and the task is not a collective (local ids repeat across ranks).
std::string task_label(const TaskGraph& graph, TaskIndex i);

// "a -> b -> c -> a" for a path of task indices.
std::string describe_path(const TaskGraph& graph, const std::vector<TaskIndex>& path);

// Whether `to` is reachable from `from` through one or more dependency edges (a task does not
// reach itself without a cycle).
bool has_path(const TaskGraph& graph, TaskIndex from, TaskIndex to);

// Throws InputError("dependency cycle: a -> b -> a") when the graph has a cycle.
void check_acyclic(const TaskGraph& graph);

// Kahn's algorithm, always taking the ready task with the smallest index. Throws InputError with
// the cycle's path when the graph is cyclic.
std::vector<TaskIndex> topological_order(const TaskGraph& graph);

struct CriticalPath {
  TimeNs length_ns = 0;
  std::vector<TaskIndex> path;  // from a source to a sink, in dependency order
};

// Longest path when task i takes durations[i] (edges cost nothing). Ties pick the smallest
// index, both for the predecessor and for the end of the path. durations must have one entry per
// task, none negative. An empty graph gives length 0 and an empty path.
CriticalPath critical_path(const TaskGraph& graph, const std::vector<TimeNs>& durations);

}  // namespace moesim
