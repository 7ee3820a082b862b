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

ClusterSpec loopback_cluster(const ClusterSpec& base, int ranks) {
  if (ranks < 1 || ranks > kMaxLoopbackRanks)
    throw InputError("a loopback node holds 1 to " + std::to_string(kMaxLoopbackRanks) + " virtual ranks, got " +
                     std::to_string(ranks));
  if (base.pure_alpha_beta())
    throw InputError(base.alpha_beta->origin, "cluster " + base.name +
                                                  " is simulated with pure alpha-beta costs, which describe no GPU; "
                                                  "loopback ranks share a GPU's compute and memory");
  ClusterSpec c;
  c.node.gpu = base.node.gpu;
  c.node.pcie_h2d = base.node.pcie_h2d;
  c.node.pcie_d2h = base.node.pcie_d2h;
  c.node.interference = base.node.interference;
  c.node.gpus_per_node = ranks;
  c.node.loopback = true;
  c.node.name = base.node.gpu.name + " loopback x" + std::to_string(ranks);
  c.node.origin = base.origin;
  c.name = c.node.name;
  c.origin = base.origin;
  c.num_nodes = 1;
  return c;
}

ClusterSpec run_hardware(const ClusterSpec& file, int ranks, bool loopback) {
  if (loopback) return loopback_cluster(file, ranks);
  if (file.node.loopback)
    throw InputError(file.origin, "hardware " + file.name + " is a loopback node (virtual ranks on one GPU); "
                                  "give --loopback to run the ranks that way, or a preset of real GPUs");
  return file;
}

}  // namespace moesim
