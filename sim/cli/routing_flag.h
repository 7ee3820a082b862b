// --routing: one parser for the commands that read it (simulate, its whole training step, plan), so
// that each refuses a bad value with the same words.
#pragma once

#include <string>

#include "sim/spec/routing_spec.h"

namespace moesim::cli {

// --routing's value (uniform | zipf:<s> | matrix:<file>, a path relative to the current
// directory); InputError naming --routing and the accepted forms.
RoutingSpec parse_routing_flag(const std::string& value);

}  // namespace moesim::cli
