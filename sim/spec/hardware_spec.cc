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
  c.node.copy_engines = base.node.copy_engines;
  c.node.host_memory = base.node.host_memory;
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

std::string gpu_count_problem(const ClusterSpec& preset, std::int64_t gpus) {
  const int per_node = preset.node.gpus_per_node;
  const std::string count = std::to_string(gpus);
  if (gpus < 1) return count + " is not a positive GPU count";
  if (gpus % per_node != 0)
    return count + " is not a multiple of the " + std::to_string(per_node) + " GPUs per node of " + preset.name +
           "; a GPU count sets the number of whole nodes";
  const std::int64_t nodes = gpus / per_node;
  if (gpus > kMaxClusterGpus)
    return count + " is more than the limit of " + std::to_string(kMaxClusterGpus) + " GPUs in a cluster";
  if (nodes > kMaxClusterNodes)
    return count + " needs " + std::to_string(nodes) + " nodes, more than the limit of " +
           std::to_string(kMaxClusterNodes);
  if (nodes > 1 && preset.node.loopback)
    return count + " needs " + std::to_string(nodes) + " nodes, but " + preset.name + " is a loopback node (one GPU)";
  if (nodes > 1 && !(preset.inter_node.effective_bandwidth() > 0))
    return count + " needs " + std::to_string(nodes) + " nodes but " + preset.name + " has no inter_node link";
  return "";
}

ClusterSpec with_gpus(const ClusterSpec& preset, std::int64_t gpus, const SourceLocation& where,
                      const std::string& what) {
  const std::string problem = gpu_count_problem(preset, gpus);
  if (!problem.empty()) throw InputError(where, what + " = " + problem);
  ClusterSpec c = preset;
  c.num_nodes = static_cast<int>(gpus / preset.node.gpus_per_node);
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
