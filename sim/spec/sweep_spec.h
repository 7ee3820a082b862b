// SweepSpec: the grid of a `moesim sweep` (a sweep YAML file, kind `sweep`, or flags).
//
// Axes (every one a non-empty list): models and hardware (file paths), gpus (GPU counts; empty =
// each hardware preset's own count), tokens per GPU, chunks (pipeline degrees n), strategies and
// routing. The grid is their Cartesian product, iterated in that order with n innermost; results
// are reported in this grid order whatever the number of threads or MPI ranks.
//
// A GPU count g overrides the preset's num_nodes with g / gpus_per_node, so g must be a positive
// multiple of gpus_per_node (a partial node would change the topology); the expert-parallel group
// spans all g GPUs. Routing values are what `--routing` takes (uniform, zipf:<s>, matrix:<file>,
// sim/spec/routing_spec.h); a matrix path in a sweep file is relative to that file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/spec/routing_spec.h"
#include "sim/spec/types.h"

namespace moesim {

template <typename T>
struct SweepAxis {
  std::vector<T> values;
  SourceLocation where;  // the key in the sweep file (file empty when given by a flag)
};

struct SweepSpec {
  std::string name = "sweep";
  SourceLocation origin;
  SweepAxis<std::string> models;    // paths
  SweepAxis<std::string> hardware;  // paths
  SweepAxis<int> gpus;              // empty values: the presets' GPU counts
  SweepAxis<std::int64_t> tokens;
  SweepAxis<int> chunks;
  SweepAxis<MemoryStrategy> strategies;
  SweepAxis<std::string> routing;   // as written (the report's label)
  // The parsed routing values, in the axis's order (matrix paths resolved).
  std::vector<RoutingSpec> routing_specs() const;
  OrderPolicy order = OrderPolicy::kMPipeMoE;
  int num_moe_layers = 1;
  int slots = 2;
  Optimizer optimizer = Optimizer::kAdam;
  bool count_routing_data = true;
  TimeNs step_target_ns = 0;        // capacity view: the step must take at most this; 0 = none
};

// Loads a sweep file. Paths are relative to the file. Every list must be non-empty; models and
// hardware files must exist (checked here, loaded by the sweep). InputError with file:line:col.
SweepSpec load_sweep_spec(const std::string& path);

}  // namespace moesim
