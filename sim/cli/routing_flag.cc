#include "sim/cli/routing_flag.h"

#include "sim/core/error.h"

namespace moesim::cli {

RoutingSpec parse_routing_flag(const std::string& value) {
  try {
    return parse_routing_spec(value, SourceLocation{});
  } catch (const InputError& e) {
    throw InputError("--routing: " + e.rule());
  }
}

}  // namespace moesim::cli
