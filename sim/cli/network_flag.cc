#include "sim/cli/network_flag.h"

#include "sim/core/error.h"
#include "sim/driver/model_registry.h"

namespace moesim::cli {
namespace {

// The registry's entry of `kind` called `value`, or InputError naming the flag and the valid names.
const CostModelEntry& registered(CostModelKind kind, const char* flag, const std::string& value) {
  if (const CostModelEntry* entry = find_cost_model(kind, value)) return *entry;
  std::string valid;
  for (const std::string& name : cost_model_names(kind)) valid += (valid.empty() ? "" : ", ") + name;
  throw InputError(std::string(flag) + " '" + value + "' is not a " + std::string(to_string(kind)) +
                   " model; valid: " + valid);
}

}  // namespace

NetworkModel parse_network_flag(const std::string& value) {
  // The spec's vocabulary and the registry hold the same names (ModelRegistry tests).
  return *parse_network_model(registered(CostModelKind::kNetwork, "--network", value).name);
}

ComputeModel parse_compute_flag(const std::string& value) {
  return *parse_compute_model(registered(CostModelKind::kCompute, "--compute", value).name);
}

}  // namespace moesim::cli
