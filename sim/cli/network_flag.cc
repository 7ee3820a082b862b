#include "sim/cli/network_flag.h"

#include "sim/spec/run_options.h"

namespace moesim::cli {

NetworkModel parse_network_flag(const std::string& value) {
  RunSpec run;
  run_option("network").set_from_flag(run, value);
  return run.network;
}

}  // namespace moesim::cli
