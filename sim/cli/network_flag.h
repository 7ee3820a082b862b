// --network: the collective model of simulate, plan, sweep, collective and validate published,
// read in one place so that every command accepts the same names and says the same thing about a
// bad one (main.cc declares the flag with kNetworkFlagHelp).
#pragma once

#include <string>

#include "sim/spec/types.h"

namespace moesim::cli {

inline constexpr const char* kNetworkFlagHelp =
    "collective model: auto|alpha-beta|flow (auto: flow when the hardware has a topology, else alpha-beta; "
    "docs/network.md)";

// The model `value` names; InputError naming --network and the valid names otherwise.
NetworkModel parse_network_flag(const std::string& value);

}  // namespace moesim::cli
