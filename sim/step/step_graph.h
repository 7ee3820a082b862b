// build_step_graph: the task graph of one whole training step (issue 23): every pipeline stage's
// program (sim/schedule) as tasks on the stage's representative rank, the transfers between
// stages, the data-parallel gradient reductions, the optimizer step and, with the distributed
// optimizer, the all-gather of the updated weights.
//
// Transfers between stages are point-to-point tasks on comm.pipeline (an all-to-allv of two
// members with one non-zero pair, as NCCL runs both with send/recv): a microbatch's activations
// (forward) or their gradient (backward), b x s x h / (cp x tp) elements per rank (each
// tensor-parallel rank sends its 1/tp: sequence parallelism, or Megatron-LM's scatter-gather).
// A transfer starts when the producing pass has ended and the receiving stage has finished the
// action before the one that consumes it (its receive is posted then); the consumer waits for it.
// The sender does not: its next action may run while the transfer is in flight.
//
// Memory: each stage's rank holds its model states (sim/memory/model_states.h) for the whole
// step; each (microbatch, layer) keeps its activations (sim/memory/activations.h) from its forward
// to its backward, and recomputation re-creates what it dropped for the backward's duration.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/graph/task_graph.h"
#include "sim/schedule/pipeline_schedule.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/step_spec.h"
#include "sim/step/moe_routing.h"
#include "sim/step/step_emitter.h"
#include "sim/step/step_shape.h"

namespace moesim {

// One pipeline action as emitted: the tasks [first, end) of the graph, on the stage's rank or
// its collectives (with the transfer into the pass, on comm.pipeline, first), so that reports can
// show passes rather than kernels.
struct PassSpan {
  int stage = 0;
  PipeAction action;
  int part = 0;  // the model part it runs
  TaskIndex first = 0;
  TaskIndex end = 0;
};

struct StepGraph {
  StepShape shape;
  TaskGraph graph;
  std::vector<std::int64_t> model_state_bytes;  // per stage, per GPU
  std::vector<PassSpan> passes;                 // in emission order
  std::shared_ptr<const MoeRouting> routing;    // the MoE layers' routing plan (--routing); null: uniform
  HostLaunchNotes launch_notes;                 // for the host model (--host-launch-us)
  // Where two passes' tasks run interleaved (DualPipe's overlapped forward and backward): each
  // range of task indices [first, first + order.size()) and the order its tasks are issued in
  // (TaskGraph::release_stream_order). Elsewhere a rank issues its tasks in index order.
  struct Interleaved {
    TaskIndex first = 0;
    std::vector<TaskIndex> order;
  };
  std::vector<Interleaved> interleaved;
};

// The program order of every task of `g` (HostIssueSpec::issue_order): index order, but each
// interleaved range in its own order. Empty when nothing is interleaved.
std::vector<TaskIndex> issue_order(const StepGraph& g);

StepGraph build_step_graph(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec);

}  // namespace moesim
