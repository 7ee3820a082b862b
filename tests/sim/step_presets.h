// The bundled model and cluster presets the whole-step tests use (models/*.yaml, and cluster
// presets grown or shrunk to a GPU count), read from the source tree, and a small layout.
#pragma once

#include <string>

#include "sim/spec/loader.h"
#include "sim/spec/step_spec.h"

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

// 16 GPUs as tp 2, pp 4, dp 2; global batch 16 of 1,024-token sequences, micro-batch 1: 8
// microbatches per pipeline.
inline StepSpec tp2_pp4_step() {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = 2;
  s.layout.pp = 4;
  s.global_batch = 16;
  s.micro_batch = 1;
  s.seq = 1024;
  return s;
}

}  // namespace moesim::testing
