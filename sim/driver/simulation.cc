#include "sim/driver/simulation.h"

#include <algorithm>
#include <memory>

#include "sim/driver/model_registry.h"
#include "sim/engine/engine.h"
#include "sim/engine/trace_recorder.h"

namespace moesim {

BuildOptions build_options_for(const ClusterSpec& cluster, BuildOptions options) {
  if (resolve_cost_model(compute_entry(ComputeModel::kAuto), cluster).single_comm_stream)
    options.single_comm_stream = true;
  // Virtual ranks slow each other down, so one representative rank would not show the step; all
  // of them share the GPU, those of other data-parallel replicas too.
  if (cluster.node.loopback) {
    options.representative_rank = false;
    options.all_replicas = true;
  }
  return options;
}

namespace {

// The compute model `requested` stands for on `cluster`, its needs checked.
const CostModelEntry& compute_model_for(const ClusterSpec& cluster, ComputeModel requested) {
  const CostModelEntry& entry = resolve_cost_model(compute_entry(requested), cluster);
  check_cost_model_needs(entry, cluster);
  return entry;
}

// Which tasks hold a GPU's SMs and which queue behind them (sim/engine/kernel_queue.h): GEMMs
// and memory-bound kernels hold them; device-to-device copies and every collective queue (NCCL's
// and DeepEP's kernels run on the SMs as the device copies of one GPU do). Host copies run on the
// copy engines: neither.
std::vector<KernelRole> kernel_roles(const TaskGraph& graph) {
  std::vector<KernelRole> roles(graph.num_tasks(), KernelRole::kNone);
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const Work& work = graph.task(i).work;
    if (std::holds_alternative<GemmWork>(work) || std::holds_alternative<ElementwiseWork>(work)) {
      roles[i] = KernelRole::kHoldsSms;
    } else if (const auto* copy = std::get_if<CopyWork>(&work)) {
      if (copy->direction == CopyDirection::kDeviceToDevice) roles[i] = KernelRole::kQueuesBehind;
    } else if (std::holds_alternative<CollectiveWork>(work)) {
      roles[i] = KernelRole::kQueuesBehind;
    }
  }
  // Nothing queues: no kernel needs to be followed.
  if (std::find(roles.begin(), roles.end(), KernelRole::kQueuesBehind) == roles.end()) roles.clear();
  return roles;
}

}  // namespace

BuildOptions build_options_for(const ClusterSpec& cluster, const RunSpec& run, BuildOptions options) {
  options = build_options_for(cluster, options);
  const CostModelEntry& compute = compute_model_for(cluster, run.compute);
  options.single_comm_stream = compute.single_comm_stream;
  if ((run.tp_size > 1 || run.grad_sync) && !compute.prices_collectives &&
      resolve_network_model(cluster, run.network) == NetworkModel::kFlow)
    options.representative_rank = false;
  return options;
}

NetworkModel resolve_network_model(const ClusterSpec& cluster, NetworkModel requested) {
  const CostModelEntry& entry = resolve_cost_model(network_entry(requested), cluster);
  return *parse_network_model(entry.name);
}

ComputeModel resolve_compute_model(const ClusterSpec& cluster, ComputeModel requested) {
  const CostModelEntry& entry = resolve_cost_model(compute_entry(requested), cluster);
  return *parse_compute_model(entry.name);
}

std::unique_ptr<CollectiveModel> make_collective_model(const TaskGraph& graph, const ClusterSpec& cluster,
                                                       NetworkChoice choice) {
  const CostModelEntry& entry = resolve_cost_model(network_entry(choice.model), cluster);
  check_cost_model_needs(entry, cluster);
  return entry.make_network(graph, cluster, choice.all_to_all);
}

std::vector<TimeNs> isolated_durations(const TaskGraph& graph, const ClusterSpec& cluster,
                                       NetworkChoice choice) {
  const CostModelEntry& compute = compute_model_for(cluster, choice.compute);
  const CostModelEntry::IsolatedCost cost = compute.isolated(graph, cluster);
  std::unique_ptr<CollectiveModel> network;
  if (!compute.prices_collectives) network = make_collective_model(graph, cluster, choice);
  std::vector<TimeNs> out(graph.num_tasks());
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const Task& t = graph.task(i);
    const auto* c = std::get_if<CollectiveWork>(&t.work);
    out[i] = c && network ? network->isolated_duration(*c, graph.group(c->group)) : cost(t);
  }
  return out;
}

EngineRun simulate_graph(const TaskGraph& graph, const ClusterSpec& cluster, NetworkChoice choice,
                         const HostIssueSpec* host) {
  Engine engine(graph);
  if (host != nullptr) engine.issue_from_host(*host);
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
  const CostModelEntry& compute = compute_model_for(cluster, choice.compute);
  // A model that prices the collectives itself (PipeMoE's alpha-beta model) has no SMs to queue for.
  if (!compute.prices_collectives)
    if (std::vector<KernelRole> roles = kernel_roles(graph); !roles.empty()) engine.queue_kernels(std::move(roles));
  for (std::unique_ptr<ActivityModel>& model : compute.make_compute(graph, cluster)) engine.add_model(std::move(model));
  if (!compute.prices_collectives) engine.add_model(make_collective_model(graph, cluster, choice));
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
  EngineRun run_result = simulate_graph(graph, cluster, NetworkChoice{run.network, run.all_to_all, run.compute});
  StepMetrics metrics = compute_step_metrics(graph, run_result.trace);
  return SimulationResult{std::move(dims), std::move(graph), std::move(run_result.trace), std::move(metrics),
                          std::move(run_result.memory), std::move(routing_stats)};
}

}  // namespace moesim
