// --network and --compute: the cost models of simulate, plan, sweep (and --network of collective
// and validate), looked up by name in the model registry (sim/driver/model_registry.h) in one
// place, so that every command accepts the same names and says the same thing about a bad one
// (main.cc declares the flags with these help texts).
#pragma once

#include <string>

#include "sim/spec/types.h"

namespace moesim::cli {

inline constexpr const char* kNetworkFlagHelp =
    "collective model: auto|alpha-beta|flow (auto: flow when the hardware has a topology, else alpha-beta; "
    "`moesim cost-models`, docs/network.md)";
inline constexpr const char* kComputeFlagHelp =
    "compute model: auto|roofline|pipemoe-alpha-beta (auto: pipemoe-alpha-beta when the hardware's alpha_beta "
    "says simulate: true, else roofline; `moesim cost-models`)";

// The model `value` names; InputError naming --network and the registry's names otherwise.
NetworkModel parse_network_flag(const std::string& value);
// The same for --compute.
ComputeModel parse_compute_flag(const std::string& value);

}  // namespace moesim::cli
