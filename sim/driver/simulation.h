// The simulator's one entry point: specs in, graph + trace + metrics out.
//
// Assembles the engine with the resource models chosen for the hardware and run: LocalTaskModel
// for kernels, HostCopyModel for host <-> device copies (shared PCIe links), and for collectives AlphaBetaNetwork or FlowNetwork (NetworkChoice;
// `auto` takes the flow model when the hardware file describes a topology -- and a fabric for
// several nodes -- and alpha-beta otherwise); PureAlphaBetaModel for everything when the hardware
// file's alpha_beta section says simulate: true. The CLI, the tests and the benchmarks run exactly
// the same thing.
#pragma once

#include <memory>
#include <vector>

#include "sim/engine/trace.h"
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
// communication channel per rank (BuildOptions::single_comm_stream).
BuildOptions build_options_for(const ClusterSpec& cluster, BuildOptions options = {});
// ... and the run: with tensor parallelism or gradient sync under the flow model every rank of a
// replica is simulated, since the all-to-alls of the other tensor indices and the gradient rings
// of the other ranks share NICs and switches with the representative rank's (with one rank, the
// flow model would not see them); every gradient ring has a member in the first replica.
BuildOptions build_options_for(const ClusterSpec& cluster, const RunSpec& run, BuildOptions options = {});

struct NetworkChoice {
  NetworkModel model = NetworkModel::kAuto;
  AllToAllAlgorithm all_to_all = AllToAllAlgorithm::kPairwise;
};

// `auto` resolved for `cluster`. Throws InputError for the flow model on a cluster without a
// topology (or without a fabric for several nodes).
NetworkModel resolve_network_model(const ClusterSpec& cluster, NetworkModel requested);

// The collective model for `graph` on `cluster`. Throws InputError for 2dh under alpha-beta.
std::unique_ptr<CollectiveModel> make_collective_model(const TaskGraph& graph, const ClusterSpec& cluster,
                                                       NetworkChoice choice);

// Duration of every task run alone (no interference), from the same cost and network models the
// engine uses; the input of critical-path analysis.
std::vector<TimeNs> isolated_durations(const TaskGraph& graph, const ClusterSpec& cluster,
                                       NetworkChoice network = {});

// Runs the engine over an existing graph on `cluster`, tracking memory.
EngineRun simulate_graph(const TaskGraph& graph, const ClusterSpec& cluster, NetworkChoice network = {});

// Builds the MoE graph for the specs (with build_options_for(cluster, run, options)) and simulates it.
SimulationResult simulate_step(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                               const BuildOptions& options = {});

}  // namespace moesim
