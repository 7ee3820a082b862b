// --network of the commands outside the run options' table (collective, validate): the same names
// and the same words about a bad one as simulate, plan and sweep, whose --network is the run
// option's (sim/spec/run_options.h; the registry, sim/driver/model_registry.h, holds the same
// names, which a test checks).
#pragma once

#include <string>

#include "sim/spec/types.h"

namespace moesim::cli {

// The model `value` names; InputError "--network: unknown value ..." otherwise.
NetworkModel parse_network_flag(const std::string& value);

}  // namespace moesim::cli
