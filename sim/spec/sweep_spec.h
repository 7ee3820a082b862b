// SweepSpec: the grid of a `moesim sweep` (a sweep YAML file, kind `sweep`, or flags).
//
// Axes (every one a non-empty list): models and hardware (file paths), gpus (GPU counts; empty =
// each hardware preset's own count), tokens, tp (tensor-parallel degrees, default [1]), routing,
// strategies and chunks (pipeline degrees n). The grid is their Cartesian product, iterated in the
// order model, hardware, gpus, tokens, tp, routing, strategy, n (n innermost): the layouts of one
// token count are neighbours. Results are reported in this grid order whatever the number of
// threads or MPI ranks.
//
// A GPU count g overrides the preset's num_nodes with g / gpus_per_node, so g must be a positive
// multiple of gpus_per_node (a partial node would change the topology). A tensor-parallel degree t
// must divide g (and the model's d_ffn, sim/build/layer_dims.h); the expert-parallel group
// spans the g / t ranks of one tensor index (ep_size 0), so there is one data-parallel replica.
// Routing values are what `--routing` takes (uniform, zipf:<s>, matrix:<file>,
// sim/spec/routing_spec.h); a matrix path in a sweep file is relative to that file.
//
// The token axis counts in one of two units (TokenUnit), given by exactly one of two keys: `tokens`
// (--tokens) is B, the tokens per GPU of RunSpec::tokens_per_gpu; `global_tokens`
// (--global-tokens) is the cluster's batch T per step. The t ranks of a tensor-parallel group hold
// the same B tokens, so T = g / t x B: a global batch gives each configuration B = T / (g / t) and
// must divide evenly, which lets layouts of the same GPUs be compared at one batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/spec/routing_spec.h"
#include "sim/spec/run_spec.h"
#include "sim/spec/types.h"

namespace moesim {

// What the values of the token axis count.
enum class TokenUnit {
  kPerGpu,  // tokens: B per GPU
  kGlobal,  // global_tokens: T for the whole cluster, B = T / (GPUs / tp)
};
// The sweep file's key of the axis in this unit: "tokens" or "global_tokens".
inline const char* token_axis_key(TokenUnit u) { return u == TokenUnit::kGlobal ? "global_tokens" : "tokens"; }

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
  SweepAxis<std::int64_t> tokens;  // in `token_unit`
  TokenUnit token_unit = TokenUnit::kPerGpu;
  SweepAxis<int> tp{{1}, {}};       // tensor-parallel degrees (DeepSpeed-TED)
  SweepAxis<int> chunks;
  SweepAxis<MemoryStrategy> strategies;
  SweepAxis<std::string> routing;   // as written (the report's label)
  // The parsed routing values, in the axis's order (matrix paths resolved).
  std::vector<RoutingSpec> routing_specs() const;
  // The run options every configuration takes as a run file gives them (sweep_fixed_keys(); the
  // axes' fields are set per configuration).
  RunSpec fixed;
  TimeNs step_target_ns = 0;        // capacity view: the step must take at most this; 0 = none

  const char* token_key() const { return token_axis_key(token_unit); }
};

// The run-file keys a sweep file takes as they are, for every configuration (sim/spec/run_options.h).
const std::vector<std::string>& sweep_fixed_keys();

// Loads a sweep file. Paths are relative to the file. Every list must be non-empty; models and
// hardware files must exist (checked here, loaded by the sweep); exactly one of tokens and
// global_tokens. InputError with file:line:col.
SweepSpec load_sweep_spec(const std::string& path);
// The same over text already read; paths are relative to the folder `file` would be in.
SweepSpec parse_sweep_spec(const std::string& text, const std::string& file);

}  // namespace moesim
