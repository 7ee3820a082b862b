// The simulator's one entry point: specs in, graph + trace + metrics out.
//
// Assembles the engine with the cost models the run picks by name from the registry
// (model_registry.h): a compute model for kernels and host copies (roofline: LocalTaskModel and
// HostCopyModel; pipemoe-alpha-beta: PureAlphaBetaModel for every task) and, unless the compute
// model prices collectives too, a network model (alpha-beta or flow). `auto` follows the hardware:
// the flow model when the hardware file describes a topology -- and a fabric for several nodes --
// else alpha-beta; PipeMoE's costs when its alpha_beta section says simulate: true, else roofline.
// The CLI, the tests and the benchmarks run exactly the same thing.
#pragma once

#include <memory>
#include <vector>

#include "sim/engine/host_issue.h"
#include "sim/graph/trace.h"
#include "sim/build/moe_graph.h"
#include "sim/graph/task_graph.h"
#include "sim/memory/memory_tracker.h"
#include "sim/net/collective_model.h"
#include "sim/report/metrics.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim {

struct SimulationResult {
  LayerDims dims;
  TaskGraph graph;
  Trace trace;
  StepMetrics metrics;
  std::vector<RankMemory> memory;  // per simulated rank, in rank order
  RoutingStats routing;            // the imbalance the run's routing causes
};

// The outcome of one engine run: when every task ran, and the memory it used.
struct EngineRun {
  Trace trace;
  std::vector<RankMemory> memory;
};

// The build options the hardware implies on top of `options`: a pure alpha-beta cluster has one
// communication channel per rank (BuildOptions::single_comm_stream), as its auto compute model assumes.
BuildOptions build_options_for(const ClusterSpec& cluster, BuildOptions options = {});
// ... and the run: its compute model sets single_comm_stream (InputError when the cluster lacks
// what that model needs); with tensor parallelism or gradient sync under the flow model every rank of a
// replica is simulated, since the all-to-alls of the other tensor indices and the gradient rings
// of the other ranks share NICs and switches with the representative rank's (with one rank, the
// flow model would not see them); every gradient ring has a member in the first replica.
BuildOptions build_options_for(const ClusterSpec& cluster, const RunSpec& run, BuildOptions options = {});

// The models a run picks by name (the compute model rides along: the engine's models are chosen
// together, and every caller that picks a network passes it on).
struct NetworkChoice {
  NetworkModel model = NetworkModel::kAuto;
  AllToAllAlgorithm all_to_all = AllToAllAlgorithm::kPairwise;
  ComputeModel compute = ComputeModel::kAuto;
};

// `auto` resolved for `cluster` (what it lacks for the model is checked when the model is built).
NetworkModel resolve_network_model(const ClusterSpec& cluster, NetworkModel requested);
ComputeModel resolve_compute_model(const ClusterSpec& cluster, ComputeModel requested);

// The collective model for `graph` on `cluster`. Throws InputError for 2dh under alpha-beta, and
// for a model whose needs the cluster does not meet (flow without a topology, or on a loopback node).
std::unique_ptr<CollectiveModel> make_collective_model(const TaskGraph& graph, const ClusterSpec& cluster,
                                                       NetworkChoice choice);

// Duration of every task run alone (no interference), from the same cost and network models the
// engine uses; the input of critical-path analysis.
std::vector<TimeNs> isolated_durations(const TaskGraph& graph, const ClusterSpec& cluster,
                                       NetworkChoice network = {});

// Runs the engine over an existing graph on `cluster`, tracking memory; with `host`, every rank's
// host issues the tasks it gates (sim/engine/host_issue.h).
EngineRun simulate_graph(const TaskGraph& graph, const ClusterSpec& cluster, NetworkChoice network = {},
                         const HostIssueSpec* host = nullptr);

// Builds the MoE graph for the specs (with build_options_for(cluster, run, options)) and simulates it.
SimulationResult simulate_step(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                               const BuildOptions& options = {});

}  // namespace moesim
