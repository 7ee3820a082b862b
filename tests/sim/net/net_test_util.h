// Helpers shared by the network tests: presets from hardware/, rank lists, running a plan alone.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/net/flow_network.h"
#include "sim/spec/loader.h"

namespace moesim::net_test {

inline ClusterSpec preset(const std::string& rel) {
  return load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/" + rel);
}

inline std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

inline TimeNs run(const ClusterTopology& t, CollectivePlan plan) {
  return FlowSimulator::run_alone(t, std::make_shared<const CollectivePlan>(std::move(plan)));
}

}  // namespace moesim::net_test
