// HostLinks: the links a host <-> device copy crosses, for HostCopyModel (docs/concepts.md,
// "Host copies").
//
// Every physical GPU has, per direction, its own link at the node's per-GPU PCIe rate (pcie.d2h /
// h2d bandwidth x efficiency: what one GPU's copies reach alone, the figure `moesim calibrate`
// measures). Then:
//   - with a node topology, the topology's links from the GPU through PCIe switches to the nearest
//     CPU (the shortest path whose inner devices are PCIe switches; ties by the file's link
//     order), each link once per direction (PCIe is full duplex: a D2H and an H2D do not share
//     it) at lanes x bandwidth x efficiency. On a DGX A100 two GPUs (and two NICs) share a switch
//     whose one x16 uplink reaches the CPU, so two GPUs copying at once each get half of it;
//   - last the host memory: of the CPU the path ends at (the node's host_memory bandwidth x
//     efficiency split equally among its CPUs: pinned buffers sit in the memory of the GPU's
//     socket), or, without a topology, of the whole node. Host memory serves both directions (DRAM
//     reads and writes share its bandwidth).
// A topology in which some GPU reaches no CPU through PCIe switches alone is not used for copies
// (the node falls back to the per-GPU links and one host memory). Links are numbered densely:
// GPU links, then the topology's directed links node by node, then the host memories.
// NIC traffic through the same switch (GPUDirect RDMA between a GPU and its NIC) is not routed
// here: it crosses the GPU's own port, not the switch's uplink, and its slowdown of a concurrent
// copy is the interference table's memcpy-with-communication factor (MPipeMoE Fig. 3).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/graph/task.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

class HostLinks {
 public:
  using Link = std::int32_t;

  // A node without a PCIe rate for a direction gets a link of capacity 0 (HostCopyModel refuses a
  // copy over it: a node that makes no copies needs no host link).
  explicit HostLinks(const ClusterSpec& cluster);

  int num_devices() const { return num_devices_; }
  std::size_t num_links() const { return capacity_.size(); }
  // Bytes per ns a link carries.
  double capacity(Link l) const { return capacity_[static_cast<std::size_t>(l)]; }
  // Whether copies cross the node topology's PCIe links.
  bool uses_topology() const { return !hop_path_.empty(); }

  // A GPU's own link for copies in `d` (kDeviceToHost or kHostToDevice).
  Link gpu_link(int device, CopyDirection d) const { return device * 2 + dir_index(d); }
  // The links after the GPU's own that a copy of `device` in `d` crosses: the topology's hops
  // (GPU to CPU for D2H, CPU to GPU for H2D), then the host memory.
  std::vector<Link> shared_path(int device, CopyDirection d) const;

  static int dir_index(CopyDirection d) { return d == CopyDirection::kDeviceToHost ? 0 : 1; }

 private:
  // One directed traversal of a topology link, from the GPU towards the CPU.
  struct Hop {
    int topo_link = 0;
    bool forward = true;  // traversed from its end `a` to `b`
  };
  void build_paths(const NodeTopology& topo, int gpus_per_node);

  int gpus_per_node_ = 1;  // physical GPUs per node (1 on a loopback node)
  int num_devices_ = 0;
  int num_pools_ = 1;      // host memories per node
  Link hop_base_ = 0;
  Link pool_base_ = 0;
  int hop_slots_ = 0;      // directed topology links per node
  std::vector<std::vector<Hop>> hop_path_;  // per local GPU; empty without a usable topology
  std::vector<int> pool_of_gpu_;            // per local GPU
  std::vector<double> capacity_;
};

}  // namespace moesim
