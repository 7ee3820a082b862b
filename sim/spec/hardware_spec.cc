#include "sim/spec/hardware_spec.h"

namespace moesim {

int NodeTopology::count(TopoDeviceKind kind, int gpus_per_node) const {
  switch (kind) {
    case TopoDeviceKind::kGpu: return gpus_per_node;
    case TopoDeviceKind::kNvSwitch: return num_nvswitches;
    case TopoDeviceKind::kPcieSwitch: return num_pcie_switches;
    case TopoDeviceKind::kCpu: return num_cpus;
    case TopoDeviceKind::kNic: return num_nics;
  }
  return 0;
}

std::string topo_device_name(TopoDevice d) {
  static constexpr const char* kPrefix[kNumTopoDeviceKinds] = {"gpu", "nvswitch", "pcie", "cpu", "nic"};
  return kPrefix[static_cast<int>(d.kind)] + std::to_string(d.index);
}

}  // namespace moesim
