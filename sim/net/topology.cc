#include "sim/net/topology.h"

#include <algorithm>
#include <deque>

#include "sim/core/error.h"

namespace moesim {
namespace {

bool is_nvswitch_link(const TopoLink& l) {
  return l.a.kind == TopoDeviceKind::kNvSwitch || l.b.kind == TopoDeviceKind::kNvSwitch;
}

double lane_capacity(const LinkSpec& type, int count) {
  return type.effective_bandwidth() * count / kNsPerS;
}

}  // namespace

std::optional<InputError> missing_topology(const ClusterSpec& cluster) {
  if (!cluster.node.topology.present) {
    return InputError(cluster.node.origin, "node " + cluster.node.name +
                                               " has no topology section; the flow network model "
                                               "needs one (or use --network alpha-beta)");
  }
  if (cluster.num_nodes > 1 && !cluster.fabric.present) {
    return InputError(cluster.origin, "cluster " + cluster.name +
                                          " has no fabric section; the flow network model needs one "
                                          "for more than one node (or use --network alpha-beta)");
  }
  return std::nullopt;
}

ClusterTopology::ClusterTopology(const ClusterSpec& cluster)
    : gpus_per_node_(cluster.node.gpus_per_node), num_nodes_(cluster.num_nodes) {
  if (auto missing = missing_topology(cluster)) throw *missing;
  const NodeTopology& topo = cluster.node.topology;
  nics_ = topo.num_nics;
  nodes_per_leaf_ = cluster.fabric.nodes_per_leaf;
  fabric_ = cluster.fabric.kind;
  gpu_nic_ = topo.gpu_nic;
  // A message between nodes takes at least the network's latency (the cluster's inter_node, as the
  // alpha-beta model and NCCL's tuning take it), whatever its links say.
  nic_latency_ = std::max(topo.nic_port.latency_ns, cluster.inter_node.latency_ns);
  topo_links_ = topo.links;

  // Vertices: GPUs, NVSwitches, PCIe switches, CPUs, NICs, in that order.
  std::vector<int> offset(kNumTopoDeviceKinds + 1, 0);
  for (int k = 0; k < kNumTopoDeviceKinds; ++k)
    offset[k + 1] = offset[k] + topo.count(static_cast<TopoDeviceKind>(k), gpus_per_node_);
  for (int k = 0; k < kNumTopoDeviceKinds; ++k)
    for (int i = 0; i < offset[k + 1] - offset[k]; ++i)
      boost::add_vertex(TopoDevice{static_cast<TopoDeviceKind>(k), i}, graph_);
  const auto vertex = [&](TopoDevice d) {
    return static_cast<std::size_t>(offset[static_cast<int>(d.kind)] + d.index);
  };

  const int num_topo = static_cast<int>(topo_links_.size());
  local_slots_ = 2 * num_topo + 2 * gpus_per_node_;
  std::vector<NetLink> local(static_cast<std::size_t>(local_slots_));
  std::vector<double> port(static_cast<std::size_t>(gpus_per_node_), 0.0);
  std::vector<TimeNs> port_latency(static_cast<std::size_t>(gpus_per_node_), 0);
  for (int e = 0; e < num_topo; ++e) {
    const TopoLink& l = topo_links_[static_cast<std::size_t>(e)];
    const LinkSpec& type = topo.link_types.at(l.type);
    boost::add_edge(vertex(l.a), vertex(l.b), EdgeProps{e}, graph_);
    link_first_vertex_.push_back(vertex(l.a));
    const double cap = lane_capacity(type, l.count);
    if (!(cap > 0))
      throw InputError(l.origin, "link " + topo_device_name(l.a) + " - " + topo_device_name(l.b) +
                                     " has zero bandwidth");
    local[static_cast<std::size_t>(2 * e)] = local[static_cast<std::size_t>(2 * e + 1)] =
        NetLink{cap, type.latency_ns};
    if (is_nvswitch_link(l)) {
      const TopoDevice gpu = l.a.kind == TopoDeviceKind::kGpu ? l.a : l.b;
      if (gpu.kind == TopoDeviceKind::kGpu) {
        port[static_cast<std::size_t>(gpu.index)] += cap;
        port_latency[static_cast<std::size_t>(gpu.index)] =
            std::max(port_latency[static_cast<std::size_t>(gpu.index)], type.latency_ns);
      }
    }
  }
  for (int g = 0; g < gpus_per_node_; ++g) {
    const auto s = static_cast<std::size_t>(2 * num_topo + 2 * g);
    local[s] = local[s + 1] = NetLink{port[static_cast<std::size_t>(g)],
                                      port_latency[static_cast<std::size_t>(g)]};
  }

  // Local routes, computed once per node type.
  const std::size_t n = static_cast<std::size_t>(gpus_per_node_);
  local_gpu_.assign(n * n, {});
  local_latency_.assign(n * n, 0);
  for (int i = 0; i < gpus_per_node_; ++i) {
    for (int j = 0; j < gpus_per_node_; ++j) {
      if (i == j) continue;
      std::vector<int>& r = local_gpu_[idx(i, j)];
      const std::size_t vi = vertex({TopoDeviceKind::kGpu, i}), vj = vertex({TopoDeviceKind::kGpu, j});
      for (auto [e, end] = boost::out_edges(vi, graph_); e != end; ++e) {
        if (boost::target(*e, graph_) == vj) r = {slot_of(graph_[*e].link, vi)};
      }
      if (r.empty() && port[static_cast<std::size_t>(i)] > 0 && port[static_cast<std::size_t>(j)] > 0)
        r = {2 * num_topo + 2 * i, 2 * num_topo + 2 * j + 1};
      if (r.empty()) r = pcie_path(vi, vj);
      MOESIM_CHECK(!r.empty(), "no route between two GPUs of a validated topology");
      TimeNs lat = 0;
      for (int s : r) lat = std::max(lat, local[static_cast<std::size_t>(s)].latency_ns);
      local_latency_[idx(i, j)] = lat;
    }
  }
  if (nics_ > 0) {
    for (int i = 0; i < gpus_per_node_; ++i) {
      const std::size_t vg = vertex({TopoDeviceKind::kGpu, i});
      const std::size_t vn = vertex({TopoDeviceKind::kNic, gpu_nic_[static_cast<std::size_t>(i)]});
      local_to_nic_.push_back(pcie_path(vg, vn));
      local_from_nic_.push_back(pcie_path(vn, vg));
      TimeNs lat = 0;
      for (int s : local_to_nic_.back()) lat = std::max(lat, local[static_cast<std::size_t>(s)].latency_ns);
      to_nic_latency_.push_back(lat);
    }
  }

  // Cluster links: every node's local links, then NIC ports, then leaf up/downlinks.
  links_.reserve(static_cast<std::size_t>(local_slots_) * static_cast<std::size_t>(num_nodes_));
  for (int node = 0; node < num_nodes_; ++node) links_.insert(links_.end(), local.begin(), local.end());
  nic_base_ = static_cast<LinkId>(links_.size());
  if (num_nodes_ > 1) {
    const NetLink nic{lane_capacity(topo.nic_port, 1), topo.nic_port.latency_ns};
    for (int node = 0; node < num_nodes_; ++node)
      for (int k = 0; k < nics_; ++k) {
        links_.push_back(nic);
        links_.push_back(nic);
      }
    leaf_base_ = static_cast<LinkId>(links_.size());
    const int groups = (num_nodes_ + nodes_per_leaf_ - 1) / nodes_per_leaf_;
    const int leaves = fabric_ == FabricKind::kFatTree ? groups : groups * nics_;
    for (int leaf = 0; leaf < leaves; ++leaf) {
      const int group = fabric_ == FabricKind::kFatTree ? leaf : leaf / nics_;
      const int nodes = std::min(nodes_per_leaf_, num_nodes_ - group * nodes_per_leaf_);
      const int ports = fabric_ == FabricKind::kFatTree ? nodes * nics_ : nodes;
      const NetLink up{nic.capacity * ports / cluster.fabric.oversubscription, nic.latency_ns};
      links_.push_back(up);
      links_.push_back(up);
    }
  }
}

int ClusterTopology::slot_of(int topo_link, std::size_t from_vertex) const {
  return 2 * topo_link + (link_first_vertex_[static_cast<std::size_t>(topo_link)] == from_vertex ? 0 : 1);
}

std::vector<int> ClusterTopology::pcie_path(std::size_t from, std::size_t to) const {
  for (bool restricted : {true, false}) {
    const std::size_t nv = boost::num_vertices(graph_);
    std::vector<int> via(nv, -1);  // topo link used to reach each vertex
    std::vector<std::size_t> prev(nv, nv);
    std::vector<bool> seen(nv, false);
    std::deque<std::size_t> queue{from};
    seen[from] = true;
    while (!queue.empty()) {
      const std::size_t v = queue.front();
      queue.pop_front();
      if (v == to) break;
      if (v != from && restricted) {
        const TopoDeviceKind k = graph_[v].kind;
        if (k != TopoDeviceKind::kPcieSwitch && k != TopoDeviceKind::kCpu) continue;
      }
      // Neighbours in topo-link order, so that ties resolve the same way on every run.
      std::vector<std::pair<int, std::size_t>> next;
      for (auto [e, end] = boost::out_edges(v, graph_); e != end; ++e)
        next.emplace_back(graph_[*e].link, boost::target(*e, graph_));
      std::sort(next.begin(), next.end());
      for (const auto& [link, w] : next) {
        if (seen[w] || is_nvswitch_link(topo_links_[static_cast<std::size_t>(link)])) continue;
        seen[w] = true;
        via[w] = link;
        prev[w] = v;
        queue.push_back(w);
      }
    }
    if (!seen[to]) continue;
    std::vector<int> path;
    for (std::size_t v = to; v != from; v = prev[v]) path.push_back(slot_of(via[v], prev[v]));
    std::reverse(path.begin(), path.end());
    return path;
  }
  return {};
}

LinkId ClusterTopology::nic_out(int node, int nic) const {
  return nic_base_ + 2 * (node * nics_ + nic);
}

int ClusterTopology::leaf_of(int node, int nic) const {
  const int group = node / nodes_per_leaf_;
  return fabric_ == FabricKind::kFatTree ? group : group * nics_ + nic;
}

TimeNs ClusterTopology::inter_latency(int i, int j) const {
  return std::max({to_nic_latency_[static_cast<std::size_t>(i)],
                   to_nic_latency_[static_cast<std::size_t>(j)], nic_latency_});
}

void ClusterTopology::route(int a, int b, std::vector<LinkId>& out) const {
  MOESIM_CHECK(a != b && a >= 0 && b >= 0 && a < num_gpus() && b < num_gpus(), "bad route request");
  const int na = a / gpus_per_node_, nb = b / gpus_per_node_;
  const int i = a % gpus_per_node_, j = b % gpus_per_node_;
  if (na == nb) {
    for (int s : local_gpu_[idx(i, j)]) out.push_back(local_link(na, s));
    return;
  }
  const int ki = nic_of(i), kj = nic_of(j);
  for (int s : to_nic(i)) out.push_back(local_link(na, s));
  out.push_back(nic_out(na, ki));
  const int la = leaf_of(na, ki), lb = leaf_of(nb, kj);
  if (la != lb) {
    out.push_back(leaf_up(la));
    out.push_back(leaf_down(lb));
  }
  out.push_back(nic_in(nb, kj));
  for (int s : from_nic(j)) out.push_back(local_link(nb, s));
}

TimeNs ClusterTopology::route_latency(int a, int b) const {
  const int na = a / gpus_per_node_, nb = b / gpus_per_node_;
  const int i = a % gpus_per_node_, j = b % gpus_per_node_;
  return na == nb ? local_latency(i, j) : inter_latency(i, j);
}

std::set<std::string> ClusterTopology::link_types_of(LinkId id) const {
  std::set<std::string> types;
  if (id >= nic_base_) return types;
  const int slot = id % local_slots_;
  const int num_topo = static_cast<int>(topo_links_.size());
  if (slot < 2 * num_topo) {
    types.insert(topo_links_[static_cast<std::size_t>(slot / 2)].type);
    return types;
  }
  const TopoDevice gpu{TopoDeviceKind::kGpu, (slot - 2 * num_topo) / 2};
  for (const TopoLink& l : topo_links_)
    if (is_nvswitch_link(l) && (l.a == gpu || l.b == gpu)) types.insert(l.type);
  return types;
}

std::string ClusterTopology::link_name(LinkId id) const {
  if (id < nic_base_) {
    const int node = id / local_slots_, slot = id % local_slots_;
    const int num_topo = static_cast<int>(topo_links_.size());
    std::string s = "node" + std::to_string(node) + ".";
    if (slot >= 2 * num_topo) {
      const int g = (slot - 2 * num_topo) / 2;
      return s + "gpu" + std::to_string(g) + (slot % 2 == 0 ? "->nvswitch" : "<-nvswitch");
    }
    const TopoLink& l = topo_links_[static_cast<std::size_t>(slot / 2)];
    const bool fwd = slot % 2 == 0;
    return s + topo_device_name(fwd ? l.a : l.b) + "->" + topo_device_name(fwd ? l.b : l.a);
  }
  if (id < leaf_base_) {
    const int k = (id - nic_base_) / 2;
    return "node" + std::to_string(k / nics_) + ".nic" + std::to_string(k % nics_) +
           ((id - nic_base_) % 2 == 0 ? "->leaf" : "<-leaf");
  }
  const int leaf = (id - leaf_base_) / 2;
  return "leaf" + std::to_string(leaf) + ((id - leaf_base_) % 2 == 0 ? "->spine" : "<-spine");
}

}  // namespace moesim
