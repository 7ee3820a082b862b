// The cost models by name. Every network and compute model the engine can run is one entry of one
// table (model_registry.cc): its name, its kind, what it needs of the hardware, a one-line
// description and its factory. The simulation builds its models through it, --network and
// --compute look their names up in it, and `moesim cost-models` prints it, so a model added here
// is selectable and listed without touching any of them.
//
// The run and sweep files are read below this layer (sim/spec), which cannot see the factories:
// their `network:` and `compute:` keys parse the same names from the spec's vocabulary
// (NetworkModel, ComputeModel in sim/spec/types.h), and a test holds the two lists equal.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.h"
#include "sim/engine/activity_model.h"
#include "sim/graph/task_graph.h"
#include "sim/net/collective_model.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/types.h"

namespace moesim {

enum class CostModelKind { kNetwork, kCompute };
std::string_view to_string(CostModelKind kind);

struct CostModelEntry {
  // The graph and cluster must outlive what the factories return.
  using NetworkFactory = std::unique_ptr<CollectiveModel> (*)(const TaskGraph&, const ClusterSpec&,
                                                               AllToAllAlgorithm);
  using ComputeFactory = std::vector<std::unique_ptr<ActivityModel>> (*)(const TaskGraph&, const ClusterSpec&);
  using IsolatedCost = std::function<TimeNs(const Task&)>;
  using IsolatedFactory = IsolatedCost (*)(const TaskGraph&, const ClusterSpec&);

  std::string_view name;
  CostModelKind kind = CostModelKind::kNetwork;
  std::string_view needs;        // what the hardware must describe, in words ("-": nothing more)
  std::string_view description;  // one line, for the listing
  // A chooser (`auto`) stands for another entry of its kind, picked for the hardware: the
  // documented resolution rule. It has no factory.
  std::string_view (*choose)(const ClusterSpec&) = nullptr;
  // What the hardware lacks to run the model, as the InputError to throw; nullopt when nothing.
  std::optional<InputError> (*unmet)(const ClusterSpec&) = nullptr;
  NetworkFactory make_network = nullptr;  // a network model: the model of the collectives
  ComputeFactory make_compute = nullptr;  // a compute model: the models of the other tasks ...
  IsolatedFactory isolated = nullptr;     // ... and their durations run alone
  // A compute model that prices the collectives too (no network model runs beside it) ...
  bool prices_collectives = false;
  // ... and assumes one communication channel per rank (BuildOptions::single_comm_stream).
  bool single_comm_stream = false;

  bool is_chooser() const { return choose != nullptr; }
};

// Every entry, network models first, each kind in the order `moesim cost-models` lists them.
std::span<const CostModelEntry> cost_models();
// The entry of `kind` called `name`, or nullptr.
const CostModelEntry* find_cost_model(CostModelKind kind, std::string_view name);
// The names of `kind`, in listing order.
std::vector<std::string> cost_model_names(CostModelKind kind);
// `entry` itself, or the entry a chooser picks for `cluster` (no check of its needs).
const CostModelEntry& resolve_cost_model(const CostModelEntry& entry, const ClusterSpec& cluster);
// Throws the InputError of what `cluster` lacks to run `entry` (a resolved one), if anything.
void check_cost_model_needs(const CostModelEntry& entry, const ClusterSpec& cluster);

// The entries the spec's choices name (InternalError if the vocabulary and the registry differ).
const CostModelEntry& network_entry(NetworkModel model);
const CostModelEntry& compute_entry(ComputeModel model);

}  // namespace moesim
