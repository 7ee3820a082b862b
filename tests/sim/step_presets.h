// The bundled model and cluster presets the whole-step tests use (models/*.yaml, and cluster
// presets grown or shrunk to a GPU count), read from the source tree, a small layout, and the
// InputError a step spec is refused with.
#pragma once

#include <string>

#include "sim/core/error.h"
#include "sim/spec/loader.h"
#include "sim/step/step_graph.h"

namespace moesim::testing {

inline ModelSpec model_preset(const std::string& name) {
  return load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/" + name + ".yaml");
}

inline ClusterSpec a100_cluster(int gpus) {
  const ClusterSpec c = load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/dgx-a100-80gb-hdr.yaml");
  return with_gpus(c, gpus, SourceLocation{}, "--gpus");
}

// A cluster preset (hardware/clusters/<file>.yaml) grown or shrunk to `gpus`.
inline ClusterSpec cluster_preset(const std::string& file, int gpus) {
  return with_gpus(load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/" + file + ".yaml"), gpus,
                   SourceLocation{}, "--gpus");
}

// GPT-1.7B (24 layers, 24 heads) on 16 GPUs: tp 2, pp 4, dp 2, 8 microbatches per pipeline of one
// 1,024-token sequence.
inline StepSpec small_gpt_step() {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = 2;
  s.layout.pp = 4;
  s.global_batch = 16;
  s.micro_batch = 1;
  s.seq = 1024;
  return s;
}

// Qwen3-30B-A3B (48 MoE layers, 128 experts, top 8) on 16 GPUs: tp 2, pp 2, ep 4 inside dp 4,
// 2 microbatches per pipeline of one 512-token sequence, sequence parallel.
inline StepSpec small_moe_step() {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = 2;
  s.layout.pp = 2;
  s.layout.ep = 4;
  s.global_batch = 8;
  s.seq = 512;
  s.sequence_parallel = true;
  return s;
}

// small_moe_step without tensor parallelism: tp 1, pp 2, ep 4 inside dp 8, still 2 microbatches
// per pipeline; every rank routes its own 512-token sequence (with tp 2 and sequence parallelism
// each rank routes its 256-token shard and the experts all-gather the rows:
// StepLayout::routes_own_shard).
inline StepSpec small_moe_step_tp1() {
  StepSpec s = small_moe_step();
  s.layout.tp = 1;
  s.global_batch = 16;
  s.sequence_parallel = false;
  return s;
}

// What build_step_graph refuses `spec` with on the A100 cluster, or "" when it builds.
inline std::string step_error_of(const StepSpec& spec, const std::string& model = "gpt-1.7b") {
  try {
    build_step_graph(model_preset(model), a100_cluster(spec.layout.gpus), spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace moesim::testing
