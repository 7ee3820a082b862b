// ClusterTopology: the link graph of a cluster for the flow-level network model (docs/network.md).
//
// One node's devices (GPUs, NVSwitches, PCIe switches, CPUs, NICs) and links form a Boost.Graph
// graph (NodeGraph), built from the node file's `topology:` section; every node of the cluster is
// a copy of it. The cluster's directed links are: each node link in both directions (capacity =
// lanes x lane bandwidth x efficiency), each GPU's port into the NVSwitch fabric (its lanes to all
// NVSwitches summed: the switches are non-blocking and NCCL stripes a peer's traffic over all of
// them, so the planes act as one crossbar), each NIC's port to its leaf switch and back, and each
// leaf's aggregate uplink to and downlink from the spine (downlink capacity of the leaf / the
// oversubscription ratio; the spine itself is non-blocking, ECMP assumed perfectly balanced).
//
// Routing follows NCCL's transports:
//   same node:  a direct NVLink if the pair has one (NCCL P2P over NVLink); else through the
//               NVSwitch fabric if both GPUs attach to it; else the shortest path through PCIe
//               switches and CPUs (NCCL P2P over PCIe, or SHM through the host) -- never relayed
//               through a third GPU.
//   two nodes:  source GPU -> its NIC (gpu_nic) over PCIe -> leaf -> [spine, when the two NICs sit
//               on different leaves] -> leaf -> destination GPU's NIC -> destination GPU. NCCL's
//               PXN (moving data over NVLink to the GPU on the destination's rail first) is not
//               modelled: cross-rail traffic crosses the spine here.
// A message pays the largest latency among its route's links (cut-through: hop latencies overlap),
// and between nodes at least the cluster's inter_node latency.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

using LinkId = std::int32_t;

struct NetLink {
  double capacity = 0;  // bytes per ns
  TimeNs latency_ns = 0;
};

// What the flow model misses in `cluster` to build its topology (a node topology section, and a
// fabric for several nodes), with the file and line to fix; nullopt when it has both. The
// constructor below throws it; the model registry asks before building anything.
std::optional<InputError> missing_topology(const ClusterSpec& cluster);

class ClusterTopology {
 public:
  struct EdgeProps {
    int link = 0;  // index into NodeTopology::links
  };
  using NodeGraph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, TopoDevice, EdgeProps>;

  // Throws InputError when the cluster has no node topology, or has several nodes and no fabric.
  explicit ClusterTopology(const ClusterSpec& cluster);

  int num_gpus() const { return gpus_per_node_ * num_nodes_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int num_nodes() const { return num_nodes_; }
  int nodes_per_leaf() const { return nodes_per_leaf_; }
  int nics_per_node() const { return nics_; }
  const NodeGraph& node_graph() const { return graph_; }

  std::size_t num_links() const { return links_.size(); }
  const NetLink& link(LinkId id) const { return links_[static_cast<std::size_t>(id)]; }
  std::string link_name(LinkId id) const;
  // The node file's link types a link is made of: one for a node link, those of a GPU's links to
  // the NVSwitches for its port into them, none for NIC ports and the fabric.
  std::set<std::string> link_types_of(LinkId id) const;

  // Appends the directed links from GPU a to GPU b (a != b) to `out`.
  void route(int a, int b, std::vector<LinkId>& out) const;
  // The latency a message from a to b pays.
  TimeNs route_latency(int a, int b) const;

  // Pieces of inter-node routes, for the aggregated collective plans (collective_plan.cc).
  const std::vector<int>& local_route(int i, int j) const { return local_gpu_[idx(i, j)]; }
  const std::vector<int>& to_nic(int i) const { return local_to_nic_[static_cast<std::size_t>(i)]; }
  const std::vector<int>& from_nic(int j) const { return local_from_nic_[static_cast<std::size_t>(j)]; }
  int nic_of(int local_gpu) const { return gpu_nic_[static_cast<std::size_t>(local_gpu)]; }
  LinkId local_link(int node, int slot) const { return node * local_slots_ + slot; }
  LinkId nic_out(int node, int nic) const;
  LinkId nic_in(int node, int nic) const { return nic_out(node, nic) + 1; }
  int leaf_of(int node, int nic) const;
  LinkId leaf_up(int leaf) const { return leaf_base_ + 2 * leaf; }
  LinkId leaf_down(int leaf) const { return leaf_base_ + 2 * leaf + 1; }
  TimeNs local_latency(int i, int j) const { return local_latency_[idx(i, j)]; }
  TimeNs inter_latency(int i, int j) const;

 private:
  std::size_t idx(int i, int j) const { return static_cast<std::size_t>(i * gpus_per_node_ + j); }
  // Shortest path from device `from` to device `to` whose inner vertices are PCIe switches or
  // CPUs (falling back to any device when there is none), as local link slots.
  std::vector<int> pcie_path(std::size_t from, std::size_t to) const;
  int slot_of(int topo_link, std::size_t from_vertex) const;

  int gpus_per_node_ = 1;
  int num_nodes_ = 1;
  int nics_ = 0;
  int nodes_per_leaf_ = 1;
  FabricKind fabric_ = FabricKind::kFatTree;
  NodeGraph graph_;
  std::vector<TopoLink> topo_links_;
  std::vector<std::size_t> link_first_vertex_;  // vertex of each topo link's end `a`
  int local_slots_ = 0;                         // directed links per node
  LinkId nic_base_ = 0;
  LinkId leaf_base_ = 0;
  std::vector<NetLink> links_;
  std::vector<std::vector<int>> local_gpu_;     // [i][j] -> local slots
  std::vector<std::vector<int>> local_to_nic_;  // [i] -> local slots, GPU i to its NIC
  std::vector<std::vector<int>> local_from_nic_;
  std::vector<TimeNs> local_latency_;
  std::vector<TimeNs> to_nic_latency_;
  std::vector<int> gpu_nic_;
  TimeNs nic_latency_ = 0;
};

}  // namespace moesim
