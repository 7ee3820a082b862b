#include "sim/driver/simulation.h"

#include <memory>

#include "sim/cost/compute_cost.h"
#include "sim/cost/host_copy_model.h"
#include "sim/cost/local_task_model.h"
#include "sim/cost/memory_kernels.h"
#include "sim/cost/pure_alpha_beta_model.h"
#include "sim/engine/engine.h"
#include "sim/net/alpha_beta.h"
#include "sim/net/flow_network.h"

namespace moesim {

BuildOptions build_options_for(const ClusterSpec& cluster, BuildOptions options) {
  if (cluster.pure_alpha_beta()) options.single_comm_stream = true;
  // Virtual ranks slow each other down, so one representative rank would not show the step; all
  // of them share the GPU, those of other data-parallel replicas too.
  if (cluster.node.loopback) {
    options.representative_rank = false;
    options.all_replicas = true;
  }
  return options;
}

BuildOptions build_options_for(const ClusterSpec& cluster, const RunSpec& run, BuildOptions options) {
  options = build_options_for(cluster, options);
  if ((run.tp_size > 1 || run.grad_sync) && !cluster.pure_alpha_beta() &&
      resolve_network_model(cluster, run.network) == NetworkModel::kFlow)
    options.representative_rank = false;
  return options;
}

NetworkModel resolve_network_model(const ClusterSpec& cluster, NetworkModel requested) {
  const bool has_topology =
      cluster.node.topology.present && (cluster.num_nodes == 1 || cluster.fabric.present);
  if (requested == NetworkModel::kAuto)
    return has_topology ? NetworkModel::kFlow : NetworkModel::kAlphaBeta;
  return requested;
}

std::unique_ptr<CollectiveModel> make_collective_model(const TaskGraph& graph, const ClusterSpec& cluster,
                                                       NetworkChoice choice) {
  if (cluster.node.loopback && choice.model == NetworkModel::kFlow)
    throw InputError(cluster.origin, "--network flow needs links between GPUs; the ranks of loopback node " +
                                         cluster.node.name + " share one GPU and exchange through its memory "
                                         "(use --network auto or alpha-beta)");
  if (resolve_network_model(cluster, choice.model) == NetworkModel::kAlphaBeta) {
    if (choice.all_to_all != AllToAllAlgorithm::kPairwise)
      throw InputError("the " + std::string(to_string(choice.all_to_all)) +
                       " all-to-all needs the flow network model (--network flow and a hardware file "
                       "with a topology); the alpha-beta model has one all-to-all formula");
    return std::make_unique<AlphaBetaNetwork>(graph, cluster);
  }
  FlowNetworkOptions options;
  options.plan.all_to_all = choice.all_to_all;
  return std::make_unique<FlowNetwork>(graph, cluster, options);
}

std::vector<TimeNs> isolated_durations(const TaskGraph& graph, const ClusterSpec& cluster,
                                       NetworkChoice choice) {
  if (cluster.pure_alpha_beta()) {
    const PureAlphaBetaModel pure(graph, cluster);
    std::vector<TimeNs> out(graph.num_tasks());
    for (TaskIndex i = 0; i < graph.num_tasks(); ++i) out[i] = pure.isolated_duration(graph.task(i));
    return out;
  }
  const ComputeCostModel compute(cluster, stored_element_bytes(graph));
  const std::unique_ptr<CollectiveModel> model = make_collective_model(graph, cluster, choice);
  const CollectiveModel& network = *model;
  std::vector<TimeNs> out(graph.num_tasks());
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const Task& t = graph.task(i);
    if (const auto* c = std::get_if<CollectiveWork>(&t.work)) {
      out[i] = network.isolated_duration(*c, graph.group(c->group));
    } else {
      out[i] = compute.isolated_duration(t);
    }
  }
  return out;
}

EngineRun simulate_graph(const TaskGraph& graph, const ClusterSpec& cluster, NetworkChoice choice) {
  Engine engine(graph);
  if (cluster.node.loopback) {
    // (A world larger than the node is refused by the collective model, as on any cluster.)
    if (static_cast<int>(graph.simulated_ranks().size()) != graph.world_size())
      throw InputError("the graph holds " + std::to_string(graph.simulated_ranks().size()) + " of its " +
                       std::to_string(graph.world_size()) + " ranks; on loopback node " + cluster.node.name +
                       " the ranks share one GPU, so every rank must be simulated (--all-ranks)");
    std::vector<int> device(static_cast<std::size_t>(graph.world_size()));
    for (int r = 0; r < graph.world_size(); ++r) device[static_cast<std::size_t>(r)] = cluster.device_of(r);
    engine.share_devices(std::move(device));
  }
  if (cluster.pure_alpha_beta()) {
    engine.add_model(std::make_unique<PureAlphaBetaModel>(graph, cluster));
  } else {
    engine.add_model(std::make_unique<LocalTaskModel>(graph, cluster));
    engine.add_model(std::make_unique<HostCopyModel>(graph, cluster));
    engine.add_model(make_collective_model(graph, cluster, choice));
  }
  TraceRecorder recorder(graph.num_tasks());
  MemoryTracker memory(graph);
  engine.add_observer(&recorder);
  engine.add_observer(&memory);
  engine.run();
  return EngineRun{recorder.take(), memory.ranks()};
}

SimulationResult simulate_step(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                               const BuildOptions& options) {
  LayerDims dims = derive_layer_dims(model, cluster, run);
  const std::optional<RoutingPlan> routing = make_layer_routing(dims, run);
  RoutingStats routing_stats = routing ? routing->stats() : uniform_routing_stats(routing_shape(dims));
  TaskGraph graph = build_moe_graph(model, cluster, run, build_options_for(cluster, run, options),
                                    routing ? &*routing : nullptr);
  EngineRun run_result = simulate_graph(graph, cluster, NetworkChoice{run.network, run.all_to_all});
  StepMetrics metrics = compute_step_metrics(graph, run_result.trace);
  return SimulationResult{std::move(dims), std::move(graph), std::move(run_result.trace), std::move(metrics),
                          std::move(run_result.memory), std::move(routing_stats)};
}

}  // namespace moesim
