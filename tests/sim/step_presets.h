// The bundled model and cluster presets the whole-step tests use (models/*.yaml, and the
// dgx-a100-80gb-hdr cluster grown or shrunk to a GPU count), read from the source tree.
#pragma once

#include <string>

#include "sim/spec/loader.h"

namespace moesim::testing {

inline ModelSpec model_preset(const std::string& name) {
  return load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/" + name + ".yaml");
}

inline ClusterSpec a100_cluster(int gpus) {
  const ClusterSpec c = load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/dgx-a100-80gb-hdr.yaml");
  return with_gpus(c, gpus, SourceLocation{}, "--gpus");
}

}  // namespace moesim::testing
