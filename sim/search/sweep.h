// `moesim sweep`: simulate every configuration of a grid (sweep_spec.h) on a thread pool.
//
// prepare_sweep loads every model and hardware file once and checks every configuration
// (derive_layer_dims: n within capacity, experts divisible by the GPU count, the tensor-parallel
// degree dividing the GPUs and d_ffn, a global batch dividing over the tensor-parallel groups, ...)
// before any simulation, so a bad grid fails at once with an InputError naming the sweep file's
// line (or the flag) of the axis at fault.
// run_sweep evaluates any subset of the configurations (all of them, or one MPI rank's share) and
// returns outcomes by configuration index; sweep_table joins them with the grid's labels in grid
// order. Outcomes are integers only (ns, bytes), so they travel between MPI ranks exactly and the
// gathered result is the same as a single process's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/report/sweep_report.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/parallel_layout.h"
#include "sim/spec/run_spec.h"
#include "sim/spec/sweep_spec.h"

namespace moesim::search {

struct SweepConfig {
  int model = 0;    // index into SweepPlan::models
  int cluster = 0;  // index into SweepPlan::clusters (a hardware file at one GPU count)
  int hardware = 0; // index into the hardware axis (for labels)
  std::string routing;
  RunSpec run;                     // tokens_per_gpu is B, derived from a global batch when given so
  std::int64_t global_tokens = 0;  // the cluster's batch: GPUs / tp x B
  // The layout derive_layer_dims gives (ep_size 0: the GPUs / tp ranks of one tensor index).
  ParallelLayout layout;
  bool drop_duplicate_tokens = false;  // in effect: asked for and tp > 1
};

struct SweepPlan {
  SweepSpec spec;
  std::vector<ModelSpec> models;
  std::vector<ClusterSpec> clusters;
  std::vector<SweepConfig> configs;  // grid order
};

// Loads and validates; InputError on any bad axis value or configuration.
SweepPlan prepare_sweep(const SweepSpec& spec);

// The measured part of one configuration; four integers and a flag.
struct SweepOutcome {
  TimeNs step_ns = 0;
  TimeNs forward_ns = 0;
  TimeNs backward_ns = 0;
  std::int64_t peak_bytes = 0;        // the simulated layers'
  std::int64_t model_peak_bytes = 0;  // the whole model's
  double expert_imbalance = 1.0;  // RoutingStats: max / mean tokens per expert before capacity
  double rank_imbalance = 1.0;    // max / mean rows a rank computes
  double dropped_fraction = 0.0;  // choices dropped by capacity
};

// InputError when `jobs` simulations of the configuration with the largest estimated memory
// (sim/driver/footprint.h) would need more than `limit` bytes (0: no limit), before any work.
void check_sweep_memory(const SweepPlan& plan, int jobs, std::int64_t limit);

SweepOutcome evaluate_sweep_config(const SweepPlan& plan, std::size_t index);

// Evaluates plan.configs[i] for every i in `indices` on `jobs` threads; out[k] belongs to
// indices[k]. progress(done) as in parallel_for.
std::vector<SweepOutcome> run_sweep(const SweepPlan& plan, const std::vector<std::size_t>& indices, int jobs,
                                    const std::function<void(std::size_t)>& progress = {});

// Joins outcomes (one per configuration, in grid order) with the labels.
SweepTable sweep_table(const SweepPlan& plan, const std::vector<SweepOutcome>& outcomes,
                       const std::string& tool_version);

}  // namespace moesim::search
