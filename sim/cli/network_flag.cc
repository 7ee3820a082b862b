#include "sim/cli/network_flag.h"

#include "sim/core/error.h"

namespace moesim::cli {

NetworkModel parse_network_flag(const std::string& value) {
  if (const auto model = parse_network_model(value)) return *model;
  std::string valid;
  for (const std::string& name : network_model_names()) valid += (valid.empty() ? "" : ", ") + name;
  throw InputError("--network '" + value + "' is not a network model; valid: " + valid);
}

}  // namespace moesim::cli
