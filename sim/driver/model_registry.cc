#include "sim/driver/model_registry.h"

#include <array>

#include "sim/cost/compute_cost.h"
#include "sim/cost/host_copy_model.h"
#include "sim/cost/local_task_model.h"
#include "sim/cost/memory_kernels.h"
#include "sim/cost/pure_alpha_beta_model.h"
#include "sim/net/alpha_beta.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"

namespace moesim {
namespace {

// --- network models ---

std::string_view choose_network(const ClusterSpec& cluster) {
  // Hardware files without a topology keep the alpha-beta model they were written for.
  return missing_topology(cluster) ? "alpha-beta" : "flow";
}

std::unique_ptr<CollectiveModel> make_alpha_beta(const TaskGraph& graph, const ClusterSpec& cluster,
                                                 AllToAllAlgorithm all_to_all) {
  if (all_to_all != AllToAllAlgorithm::kPairwise)
    throw InputError("the " + std::string(to_string(all_to_all)) +
                     " all-to-all needs the flow network model (--network flow and a hardware file "
                     "with a topology); the alpha-beta model has one all-to-all formula");
  return std::make_unique<AlphaBetaNetwork>(graph, cluster);
}

std::optional<InputError> flow_unmet(const ClusterSpec& cluster) {
  // Checked first: a loopback node has no topology either, and this says why none would help.
  if (cluster.node.loopback)
    return InputError(cluster.origin, "--network flow needs links between GPUs; the ranks of loopback node " +
                                          cluster.node.name + " share one GPU and exchange through its memory "
                                          "(use --network auto or alpha-beta)");
  return missing_topology(cluster);
}

std::unique_ptr<CollectiveModel> make_flow(const TaskGraph& graph, const ClusterSpec& cluster,
                                           AllToAllAlgorithm all_to_all) {
  FlowNetworkOptions options;
  options.plan.all_to_all = all_to_all;
  return std::make_unique<FlowNetwork>(graph, cluster, options);
}

// --- compute models ---

std::string_view choose_compute(const ClusterSpec& cluster) {
  // The hardware file's alpha_beta.simulate was the only way to pick PipeMoE's costs before
  // --compute; it still is what auto follows.
  return cluster.pure_alpha_beta() ? "pipemoe-alpha-beta" : "roofline";
}

std::vector<std::unique_ptr<ActivityModel>> make_roofline(const TaskGraph& graph, const ClusterSpec& cluster) {
  std::vector<std::unique_ptr<ActivityModel>> models;
  models.push_back(std::make_unique<LocalTaskModel>(graph, cluster));
  models.push_back(std::make_unique<HostCopyModel>(graph, cluster));
  return models;
}

CostModelEntry::IsolatedCost roofline_isolated(const TaskGraph& graph, const ClusterSpec& cluster) {
  auto model = std::make_shared<const ComputeCostModel>(cluster, stored_element_bytes(graph));
  return [model](const Task& task) { return model->isolated_duration(task); };
}

std::optional<InputError> pipemoe_unmet(const ClusterSpec& cluster) {
  if (!cluster.alpha_beta)
    return InputError(cluster.origin, "the pipemoe-alpha-beta compute model needs the hardware's alpha_beta "
                                      "section (PipeMoE's constants); cluster " + cluster.name +
                                          " has none (use --compute auto or roofline)");
  if (cluster.node.loopback)
    return InputError(cluster.origin, "costing every task with PipeMoE's constants cannot model virtual ranks "
                                      "sharing a GPU (loopback node " + cluster.node.name +
                                          "; use --compute auto or roofline)");
  return std::nullopt;
}

std::vector<std::unique_ptr<ActivityModel>> make_pipemoe(const TaskGraph& graph, const ClusterSpec& cluster) {
  std::vector<std::unique_ptr<ActivityModel>> models;
  models.push_back(std::make_unique<PureAlphaBetaModel>(graph, cluster));
  return models;
}

CostModelEntry::IsolatedCost pipemoe_isolated(const TaskGraph& graph, const ClusterSpec& cluster) {
  auto model = std::make_shared<const PureAlphaBetaModel>(graph, cluster);
  return [model](const Task& task) { return model->isolated_duration(task); };
}

const std::array<CostModelEntry, 6> kEntries{{
    {.name = "auto",
     .kind = CostModelKind::kNetwork,
     .needs = "-",
     .description = "flow when the hardware describes a topology (and a fabric for several nodes), else alpha-beta",
     .choose = choose_network},
    {.name = "alpha-beta",
     .kind = CostModelKind::kNetwork,
     .needs = "-",
     .description = "NCCL's algorithms with one bandwidth and latency per link class (sim/net/alpha_beta.h)",
     .make_network = make_alpha_beta},
    {.name = "flow",
     .kind = CostModelKind::kNetwork,
     .needs = "topology (+ fabric if several nodes)",
     .description = "NCCL's algorithms as max-min fair flows over the topology's links (sim/net/flow_network.h)",
     .unmet = flow_unmet,
     .make_network = make_flow},
    {.name = "auto",
     .kind = CostModelKind::kCompute,
     .needs = "-",
     .description = "pipemoe-alpha-beta when the hardware's alpha_beta section says simulate: true, else roofline",
     .choose = choose_compute},
    {.name = "roofline",
     .kind = CostModelKind::kCompute,
     .needs = "-",
     .description = "GEMMs by tiles and waves, memory-bound kernels, host copies over PCIe, interference; "
                    "a calibration's tables where given",
     .make_compute = make_roofline,
     .isolated = roofline_isolated},
    {.name = "pipemoe-alpha-beta",
     .kind = CostModelKind::kCompute,
     .needs = "alpha_beta section",
     .description = "PipeMoE's linear costs for every task, collectives included, on one channel per rank",
     .unmet = pipemoe_unmet,
     .make_compute = make_pipemoe,
     .isolated = pipemoe_isolated,
     .prices_collectives = true,
     .single_comm_stream = true},
}};

const CostModelEntry& entry_of(CostModelKind kind, std::string_view name) {
  const CostModelEntry* entry = find_cost_model(kind, name);
  MOESIM_CHECK(entry != nullptr, "no " + std::string(to_string(kind)) + " model '" + std::string(name) +
                                     "' in the registry (sim/spec/types.h and model_registry.cc differ)");
  return *entry;
}

}  // namespace

std::string_view to_string(CostModelKind kind) { return kind == CostModelKind::kNetwork ? "network" : "compute"; }

std::span<const CostModelEntry> cost_models() { return kEntries; }

const CostModelEntry* find_cost_model(CostModelKind kind, std::string_view name) {
  for (const CostModelEntry& e : kEntries)
    if (e.kind == kind && e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> cost_model_names(CostModelKind kind) {
  std::vector<std::string> names;
  for (const CostModelEntry& e : kEntries)
    if (e.kind == kind) names.emplace_back(e.name);
  return names;
}

const CostModelEntry& resolve_cost_model(const CostModelEntry& entry, const ClusterSpec& cluster) {
  return entry.is_chooser() ? entry_of(entry.kind, entry.choose(cluster)) : entry;
}

void check_cost_model_needs(const CostModelEntry& entry, const ClusterSpec& cluster) {
  if (!entry.unmet) return;
  if (std::optional<InputError> missing = entry.unmet(cluster)) throw *missing;
}

const CostModelEntry& network_entry(NetworkModel model) { return entry_of(CostModelKind::kNetwork, to_string(model)); }
const CostModelEntry& compute_entry(ComputeModel model) { return entry_of(CostModelKind::kCompute, to_string(model)); }

}  // namespace moesim
