#include "sim/cost/host_links.h"

#include <deque>
#include <string>

#include "sim/core/error.h"

namespace moesim {
namespace {

double bytes_per_ns(double bytes_per_s) { return bytes_per_s / kNsPerS; }

// The shortest path from gpu<g> to a CPU whose inner devices are PCIe switches, as the topology's
// links traversed from the GPU on; empty when no CPU is reached. Breadth-first over the links in
// the file's order, so ties go to the link written first.
struct Step {
  int link = -1;
  bool forward = true;
  int from = -1;  // index into the visited devices
};

std::vector<std::pair<int, bool>> path_to_cpu(const NodeTopology& topo, int g, int* cpu) {
  std::vector<TopoDevice> seen{{TopoDeviceKind::kGpu, g}};
  std::vector<Step> how{Step{}};
  std::deque<int> queue{0};
  auto index_of = [&seen](const TopoDevice& d) {
    for (std::size_t i = 0; i < seen.size(); ++i)
      if (seen[i] == d) return static_cast<int>(i);
    return -1;
  };
  while (!queue.empty()) {
    const int v = queue.front();
    queue.pop_front();
    const TopoDevice at = seen[static_cast<std::size_t>(v)];
    if (at.kind == TopoDeviceKind::kCpu) {
      *cpu = at.index;
      std::vector<std::pair<int, bool>> path;
      for (int w = v; how[static_cast<std::size_t>(w)].link >= 0; w = how[static_cast<std::size_t>(w)].from)
        path.insert(path.begin(), {how[static_cast<std::size_t>(w)].link, how[static_cast<std::size_t>(w)].forward});
      return path;
    }
    // Only the GPU itself and PCIe switches pass traffic on (never another GPU, a NIC or an NVSwitch).
    if (v != 0 && at.kind != TopoDeviceKind::kPcieSwitch) continue;
    for (std::size_t l = 0; l < topo.links.size(); ++l) {
      const TopoLink& link = topo.links[l];
      const bool forward = link.a == at;
      if (!forward && !(link.b == at)) continue;
      const TopoDevice next = forward ? link.b : link.a;
      if (index_of(next) >= 0) continue;
      seen.push_back(next);
      how.push_back(Step{static_cast<int>(l), forward, v});
      queue.push_back(static_cast<int>(seen.size()) - 1);
    }
  }
  return {};
}

}  // namespace

HostLinks::HostLinks(const ClusterSpec& cluster) {
  const NodeSpec& node = cluster.node;
  // A loopback node's virtual ranks run on one GPU: one device per node.
  gpus_per_node_ = node.loopback ? 1 : node.gpus_per_node;
  num_devices_ = gpus_per_node_ * cluster.num_nodes;
  if (node.topology.present && !node.loopback) build_paths(node.topology, gpus_per_node_);

  for (int d = 0; d < num_devices_; ++d) {
    capacity_.push_back(bytes_per_ns(node.pcie_d2h.effective_bandwidth()));
    capacity_.push_back(bytes_per_ns(node.pcie_h2d.effective_bandwidth()));
  }
  hop_base_ = static_cast<Link>(capacity_.size());
  hop_slots_ = uses_topology() ? static_cast<int>(node.topology.links.size()) * 2 : 0;
  for (int n = 0; n < cluster.num_nodes && uses_topology(); ++n) {
    for (const TopoLink& l : node.topology.links) {
      const LinkSpec& type = node.topology.link_types.at(l.type);
      const double cap = bytes_per_ns(type.effective_bandwidth() * l.count);
      capacity_.push_back(cap);  // a -> b
      capacity_.push_back(cap);  // b -> a
    }
  }
  pool_base_ = static_cast<Link>(capacity_.size());
  const double pool = bytes_per_ns(node.host_memory.effective_bandwidth()) / num_pools_;
  for (int n = 0; n < cluster.num_nodes; ++n)
    for (int p = 0; p < num_pools_; ++p) capacity_.push_back(pool);
}

void HostLinks::build_paths(const NodeTopology& topo, int gpus_per_node) {
  std::vector<std::vector<Hop>> paths;
  std::vector<int> pools;
  for (int g = 0; g < gpus_per_node; ++g) {
    int cpu = -1;
    const auto path = path_to_cpu(topo, g, &cpu);
    if (path.empty()) return;  // some GPU reaches no CPU: copies do not use the topology
    std::vector<Hop> hops;
    for (const auto& [link, forward] : path) hops.push_back(Hop{link, forward});
    paths.push_back(std::move(hops));
    pools.push_back(cpu);
  }
  hop_path_ = std::move(paths);
  pool_of_gpu_ = std::move(pools);
  num_pools_ = topo.num_cpus;
}

std::vector<HostLinks::Link> HostLinks::shared_path(int device, CopyDirection d) const {
  MOESIM_CHECK(device >= 0 && device < num_devices_, "a copy on device " + std::to_string(device) + " outside the cluster");
  MOESIM_CHECK(d != CopyDirection::kDeviceToDevice, "a device-to-device copy has no host path");
  const int node = device / gpus_per_node_;
  const int local = device % gpus_per_node_;
  std::vector<Link> out;
  int pool = 0;
  if (uses_topology()) {
    const bool d2h = d == CopyDirection::kDeviceToHost;
    for (const Hop& h : hop_path_[static_cast<std::size_t>(local)]) {
      // D2H runs from the GPU towards the CPU, H2D the other way.
      const bool a_to_b = h.forward == d2h;
      out.push_back(hop_base_ + node * hop_slots_ + 2 * h.topo_link + (a_to_b ? 0 : 1));
    }
    pool = pool_of_gpu_[static_cast<std::size_t>(local)];
  }
  out.push_back(pool_base_ + node * num_pools_ + pool);
  return out;
}

}  // namespace moesim
