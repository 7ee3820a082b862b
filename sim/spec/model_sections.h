// Readers of a model file (models/*.yaml); sim/spec/loader.cc opens the file.
#pragma once

#include "sim/spec/model_spec.h"
#include "sim/spec/yaml_reader.h"

namespace moesim::detail {

// A model file (kind: model): its MoE layer, architecture and published parameter counts.
ModelSpec read_model_file(const YamlValue& root);
// Every key a model file may have (a hardware file given as --model is told what it is).
const std::vector<std::string>& model_keys();

// The `architecture:` map, checked against the model's d_model and num_layers (already read).
ArchitectureSpec read_architecture(const YamlValue& v, const ModelSpec& model);

// The `published_parameters:` map.
PublishedParameters read_published_parameters(const YamlValue& v);

}  // namespace moesim::detail
