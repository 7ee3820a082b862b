#include "sim/search/sweep.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "sim/core/checked_math.h"
#include "sim/core/error.h"
#include "sim/driver/footprint.h"
#include "sim/driver/simulation.h"
#include "sim/build/moe_graph.h"
#include "sim/memory/model_memory.h"
#include "sim/search/planner.h"
#include "sim/search/thread_pool.h"
#include "sim/spec/loader.h"

namespace moesim::search {
namespace {

const ClusterSpec& cluster_of(const SweepPlan& p, const SweepConfig& c) {
  return p.clusters[static_cast<std::size_t>(c.cluster)];
}

std::string describe(const SweepPlan& p, const SweepConfig& c) {
  const ClusterSpec& cluster = cluster_of(p, c);
  std::string s = "model " + p.models[static_cast<std::size_t>(c.model)].name + ", hardware " + cluster.name +
                  " at " + std::to_string(cluster.num_gpus()) + " GPUs";
  if (c.run.tp_size > 1) s += ", tp " + std::to_string(c.run.tp_size);
  if (p.spec.token_unit == TokenUnit::kGlobal) {
    s += ", global tokens " + std::to_string(c.global_tokens);
    if (c.run.tokens_per_gpu > 0) s += " (" + std::to_string(c.run.tokens_per_gpu) + " per GPU)";
  } else {
    s += ", tokens " + std::to_string(c.run.tokens_per_gpu);
  }
  return s + ", n = " + std::to_string(c.run.num_chunks) + ", strategy " + std::string(to_string(c.run.strategy));
}

// An axis value as a message names it: by the sweep file's key (the error's location gives its
// line) or, when a flag gave the axis, by the flag.
std::string axis_value(const SourceLocation& where, const char* key, const char* flag, std::int64_t value) {
  return where.file.empty() ? std::string(flag) + " " + std::to_string(value)
                            : std::string(key) + " = " + std::to_string(value);
}

// Checks the configuration's tensor-parallel degree, then its global batch, each at its own axis,
// and fills the token count the other unit gives: B = T / (GPUs / tp), or T = GPUs / tp x B.
void resolve_tokens(const SweepPlan& plan, SweepConfig& c) {
  const SweepSpec& spec = plan.spec;
  const ClusterSpec& cluster = cluster_of(plan, c);
  try {
    check_tensor_parallel_degree(plan.models[static_cast<std::size_t>(c.model)], cluster, c.run);
  } catch (const InputError& e) {
    throw InputError(spec.tp.where, axis_value(spec.tp.where, "tp", "--tp", c.run.tp_size) + " (" +
                                        describe(plan, c) + "): " + e.rule());
  }
  // The tp ranks of a tensor-parallel group hold the same tokens: the batch splits over the groups.
  const int groups = cluster.num_gpus() / c.run.tp_size;
  if (spec.token_unit == TokenUnit::kPerGpu) {
    c.global_tokens = checked_mul(groups, c.run.tokens_per_gpu);
    return;
  }
  if (c.global_tokens % groups != 0) {
    throw InputError(spec.tokens.where,
                     axis_value(spec.tokens.where, "global_tokens", "--global-tokens", c.global_tokens) +
                         " does not divide evenly over the " + std::to_string(groups) +
                         " tensor-parallel groups (GPUs / tp = " + std::to_string(cluster.num_gpus()) + " / " +
                         std::to_string(c.run.tp_size) + ") of " + describe(plan, c) +
                         ": each group takes global_tokens / groups tokens");
  }
  c.run.tokens_per_gpu = c.global_tokens / groups;
}

void require_axes(const SweepSpec& spec) {
  const auto require = [](const auto& axis, const char* name) {
    if (axis.values.empty()) throw InputError(axis.where, std::string("the axis '") + name + "' is empty; give at least one value");
  };
  require(spec.models, "models");
  require(spec.hardware, "hardware");
  require(spec.tokens, spec.token_key());
  require(spec.tp, "tp");
  require(spec.chunks, "chunks");
  require(spec.strategies, "strategies");
  require(spec.routing, "routing");
}

std::size_t num_gpu_values(const SweepSpec& spec) { return spec.gpus.values.empty() ? 1 : spec.gpus.values.size(); }

// One cluster per (hardware file, GPU count); the index of hardware h at GPU count g is
// h * num_gpu_values + g.
void load_clusters(const SweepSpec& spec, SweepPlan& plan) {
  std::vector<ClusterSpec> presets;
  for (const std::string& path : spec.hardware.values) presets.push_back(load_hardware_spec(path));
  for (const ClusterSpec& preset : presets) {
    for (std::size_t g = 0; g < num_gpu_values(spec); ++g) {
      ClusterSpec c = preset;
      if (!spec.gpus.values.empty()) c = with_gpus(preset, spec.gpus.values[g], spec.gpus.where, "gpus");
      plan.clusters.push_back(std::move(c));
    }
  }
}

// Every grid point in grid order: model, hardware, gpus, tokens, tp, routing, strategy, n.
void expand_grid(const SweepSpec& spec, const std::vector<RoutingSpec>& routings, SweepPlan& plan) {
  const std::size_t num_g = num_gpu_values(spec);
  SweepConfig c;
  c.run = spec.fixed;
  for (std::size_t m = 0; m < plan.models.size(); ++m) {
    c.model = static_cast<int>(m);
    for (std::size_t h = 0; h < spec.hardware.values.size(); ++h) {
      c.hardware = static_cast<int>(h);
      for (std::size_t g = 0; g < num_g; ++g) {
        c.cluster = static_cast<int>(h * num_g + g);
        for (std::int64_t tokens : spec.tokens.values) {
          // The other unit depends on the GPUs and tp: resolve_tokens derives it.
          if (spec.token_unit == TokenUnit::kGlobal) {
            c.global_tokens = tokens;
          } else {
            c.run.tokens_per_gpu = tokens;
          }
          for (int tp : spec.tp.values) {
            c.run.tp_size = tp;
            for (std::size_t r = 0; r < routings.size(); ++r) {
              c.routing = spec.routing.values[r];
              c.run.routing = routings[r];
              for (MemoryStrategy s : spec.strategies.values) {
                c.run.strategy = s;
                for (int n : spec.chunks.values) {
                  c.run.num_chunks = n;
                  plan.configs.push_back(c);
                }
              }
            }
          }
        }
      }
    }
  }
}

using MatrixShape = std::tuple<std::string, int, int, int, std::int64_t, std::int64_t, int>;

// Resolves the configuration's tokens and layout before any work. A bad tp or global batch is
// named at its axis, n above capacity at the chunks axis.
void check_config(const SweepPlan& plan, SweepConfig& c, std::set<MatrixShape>& checked_matrices) {
  const SweepSpec& spec = plan.spec;
  const ModelSpec& model = plan.models[static_cast<std::size_t>(c.model)];
  const ClusterSpec& cluster = cluster_of(plan, c);
  resolve_tokens(plan, c);
  RunSpec one = c.run;
  one.num_chunks = 1;
  try {
    check_simulated_layers(model, one.num_moe_layers);
    const LayerDims d = derive_layer_dims(model, cluster, one);
    // Every chunk needs a slot per expert (uneven chunks take any n up to C).
    if (c.run.num_chunks > d.capacity)
      throw InputError(spec.chunks.where, "n = " + std::to_string(c.run.num_chunks) + " is above the capacity C = " +
                                              std::to_string(d.capacity) + " rows per expert (" + describe(plan, c) +
                                              "): each chunk needs at least one row per expert");
    const LayerDims dims = derive_layer_dims(model, cluster, c.run);
    c.layout = dims.layout();
    c.drop_duplicate_tokens = dims.drop_duplicate_tokens;
    // A routing matrix must match the layer (rows per rank, a column per expert, k experts with
    // traffic): build its routing now, once per layer shape, rather than fail mid-sweep.
    if (c.run.routing.kind == RoutingKind::kMatrix) {
      const MatrixShape key{c.run.routing.matrix_path, dims.ep_size, dims.num_experts, dims.top_k,
                            dims.tokens,                dims.capacity, dims.num_chunks};
      if (checked_matrices.insert(key).second) make_layer_routing(dims, c.run);
    }
  } catch (const InputError& e) {
    if (!e.where().file.empty() && e.where().file != model.origin.file) throw;
    throw InputError(spec.origin, "configuration " + describe(plan, c) + ": " + e.what());
  }
}

}  // namespace

SweepPlan prepare_sweep(const SweepSpec& spec) {
  SweepPlan plan;
  plan.spec = spec;
  require_axes(spec);
  const std::vector<RoutingSpec> routings = spec.routing_specs();
  for (const std::string& path : spec.models.values) plan.models.push_back(load_model_spec(path));
  load_clusters(spec, plan);
  expand_grid(spec, routings, plan);
  // Every configuration checked before any work.
  std::set<MatrixShape> checked_matrices;
  for (SweepConfig& c : plan.configs) check_config(plan, c, checked_matrices);
  return plan;
}

void check_sweep_memory(const SweepPlan& plan, int jobs, std::int64_t limit) {
  if (limit <= 0 || plan.configs.empty()) return;
  Footprint largest;
  std::size_t at = 0;
  for (std::size_t i = 0; i < plan.configs.size(); ++i) {
    const SweepConfig& c = plan.configs[i];
    const ModelSpec& model = plan.models[static_cast<std::size_t>(c.model)];
    const ClusterSpec& cluster = plan.clusters[static_cast<std::size_t>(c.cluster)];
    const Footprint f = estimate_footprint(derive_layer_dims(model, cluster, c.run), c.run, build_options_for(cluster, c.run));
    if (f.total_bytes() > largest.total_bytes()) {
      largest = f;
      at = i;
    }
  }
  const auto concurrent = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(jobs, 1)), plan.configs.size()));
  check_memory_limit(largest, concurrent, limit,
                     "configuration " + std::to_string(at + 1) + " of the sweep (the largest; " +
                         std::to_string(plan.configs[at].run.tokens_per_gpu) + " tokens per GPU on " +
                         std::to_string(plan.clusters[static_cast<std::size_t>(plan.configs[at].cluster)].num_gpus()) +
                         " GPUs)");
}

SweepOutcome evaluate_sweep_config(const SweepPlan& plan, std::size_t index) {
  const SweepConfig& c = plan.configs.at(index);
  RoutingStats routing;
  const PlanRow row = evaluate_configuration(plan.models[static_cast<std::size_t>(c.model)],
                                             plan.clusters[static_cast<std::size_t>(c.cluster)], c.run, &routing);
  return SweepOutcome{row.step_ns,          row.forward_ns,
                      row.backward_ns,      row.peak_bytes,
                      row.model_peak_bytes, routing.expert_imbalance,
                      routing.rank_imbalance, routing.dropped_fraction()};
}

std::vector<SweepOutcome> run_sweep(const SweepPlan& plan, const std::vector<std::size_t>& indices, int jobs,
                                    const std::function<void(std::size_t)>& progress) {
  std::vector<SweepOutcome> out(indices.size());
  parallel_for(indices.size(), jobs, [&](std::size_t k) { out[k] = evaluate_sweep_config(plan, indices[k]); },
               progress);
  return out;
}

SweepTable sweep_table(const SweepPlan& plan, const std::vector<SweepOutcome>& outcomes,
                       const std::string& tool_version) {
  MOESIM_CHECK(outcomes.size() == plan.configs.size(), "one outcome per sweep configuration");
  SweepTable t;
  t.name = plan.spec.name;
  t.tool_version = tool_version;
  t.step_target_ns = plan.spec.step_target_ns;
  t.token_unit = plan.spec.token_unit;
  t.grad_sync = plan.spec.fixed.grad_sync;
  t.network = plan.spec.fixed.network;
  t.zero_stage = plan.spec.fixed.zero_stage;
  t.checkpoint = plan.spec.fixed.checkpoint;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const SweepConfig& c = plan.configs[i];
    const ClusterSpec& cluster = plan.clusters[static_cast<std::size_t>(c.cluster)];
    SweepRecord r;
    r.model = plan.models[static_cast<std::size_t>(c.model)].name;
    r.hardware = cluster.name;
    r.gpus = cluster.num_gpus();
    r.tokens = c.run.tokens_per_gpu;
    r.global_tokens = c.global_tokens;
    r.layout = c.layout;
    r.drop_duplicate_tokens = c.drop_duplicate_tokens;
    r.routing = c.routing;
    r.strategy = c.run.strategy;
    r.num_chunks = c.run.num_chunks;
    r.step_ns = outcomes[i].step_ns;
    r.forward_ns = outcomes[i].forward_ns;
    r.backward_ns = outcomes[i].backward_ns;
    r.peak_bytes = outcomes[i].peak_bytes;
    r.model_peak_bytes = outcomes[i].model_peak_bytes;
    r.expert_imbalance = outcomes[i].expert_imbalance;
    r.rank_imbalance = outcomes[i].rank_imbalance;
    r.dropped_fraction = outcomes[i].dropped_fraction;
    r.capacity_bytes = cluster.node.gpu.hbm_capacity_bytes;
    r.fits = r.model_peak_bytes <= r.capacity_bytes;
    t.records.push_back(std::move(r));
  }
  return t;
}

}  // namespace moesim::search
