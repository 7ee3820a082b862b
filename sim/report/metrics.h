// StepMetrics: what a user reads first about a simulated (or measured) step, derived from a graph
// and a trace.
//
// Definitions (per rank; reports use the critical rank, the one whose last task ends last and,
// among ranks ending together -- collectives end on all members at once --, the one with the most
// local task time):
//  - step time: the end of the last task; forward: the end of the last forward task; backward: from
//    the first backward start to the last backward end.
//  - busy(stage): length of the union of the stage's task intervals (a stage is "pass.stage",
//    e.g. "fwd.dispatch").
//  - exposed(stage): the part of busy(stage) during which no task of any other stage runs on the
//    rank, i.e. time the stage is not hidden behind anything. Exposed times sum to at most the step.
//  - compute/comm/copy busy: union of the intervals of tasks on compute, comm.* and copy.* streams.
//  - overlap: compute_busy + comm_busy + copy_busy - union of all, the time saved by running
//    stream classes concurrently; overlap_fraction: the part of min(compute_busy, comm_busy) during
//    which compute and communication ran together, the share of the hideable time that was hidden
//    (0 when nothing can be hidden).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/graph/trace.h"
#include "sim/graph/task_graph.h"

namespace moesim {

struct StageMetrics {
  TimeNs busy_ns = 0;
  TimeNs exposed_ns = 0;
  int num_tasks = 0;
};

struct StepMetrics {
  int rank = 0;  // the rank these figures describe (the critical rank)
  TimeNs step_ns = 0;
  TimeNs forward_ns = 0;
  TimeNs backward_ns = 0;
  TimeNs compute_busy_ns = 0;
  TimeNs comm_busy_ns = 0;
  TimeNs copy_busy_ns = 0;
  TimeNs overlap_ns = 0;
  double overlap_fraction = 0;
  TimeNs sum_task_ns = 0;          // sum of the durations of the rank's tasks
  std::map<std::string, StageMetrics> stages;  // key "fwd.dispatch", ...
  std::vector<std::string> stage_order;         // keys in order of first appearance in the graph
};

// Figures for one rank.
StepMetrics compute_rank_metrics(const TaskGraph& graph, const Trace& trace, int rank);
// Figures for each of `ranks` (distinct), in one walk over the tasks.
std::vector<StepMetrics> compute_ranks_metrics(const TaskGraph& graph, const Trace& trace, const std::vector<int>& ranks);
// Figures for the critical rank among the simulated ones (step time is the makespan).
StepMetrics compute_step_metrics(const TaskGraph& graph, const Trace& trace);

// The union of half-open intervals [start, end) as disjoint intervals in time order, none empty;
// touching intervals ([a, b) and [b, c)) join into one.
std::vector<std::pair<TimeNs, TimeNs>> merged_intervals(std::vector<std::pair<TimeNs, TimeNs>> intervals);
// Length of the union of half-open intervals [start, end).
TimeNs union_length(std::vector<std::pair<TimeNs, TimeNs>> intervals);

}  // namespace moesim
