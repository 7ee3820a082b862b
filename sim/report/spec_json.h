// JSON views of the resolved inputs, for the `config` section of reports and for the runtime's
// check that every process of a launch resolved the same configuration.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/build/layer_dims.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim {

nlohmann::ordered_json config_json(const ModelSpec& model, const ClusterSpec& cluster,
                                   const RunSpec& run, const LayerDims& dims);

}  // namespace moesim
