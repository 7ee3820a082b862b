// Loading and validating the YAML presets (models/, hardware/).
//
// Every error is an InputError naming file:line:col and the rule: unknown keys (with the allowed
// keys and a "did you mean"), duplicate keys, wrong scalar types, .nan/.inf, missing or unsupported
// schema_version, quantities without a unit or with an unknown unit, zero or negative sizes, and
// nesting deeper than the schema needs.
#pragma once

#include <optional>
#include <string>

#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim {

inline constexpr int kSchemaVersion = 1;

ModelSpec load_model_spec(const std::string& path);

// Loads a cluster, node or GPU file (its `kind` key says which). A node is a one-node cluster; a
// GPU alone is a one-GPU node without interconnect. References to other files (a node's `gpu:`, a
// cluster's `node:`) are resolved relative to the referencing file.
ClusterSpec load_hardware_spec(const std::string& path);

// A run file (kind: run): the run options, and optionally the model and hardware files to use
// (paths relative to the run file). Keys: tokens_per_gpu (required), ep_size, num_chunks, order,
// num_moe_layers, seed, model, hardware; defaults as in RunSpec.
struct RunFile {
  RunSpec run;
  std::optional<std::string> model_path;
  std::optional<std::string> hardware_path;
};
RunFile load_run_spec(const std::string& path);

}  // namespace moesim
