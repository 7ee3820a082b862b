// Model, hardware and run file loading: the schema of models/*.yaml, hardware/**/*.yaml and run
// files (docs/config-reference.md documents every key). Calibration files are read in
// calibration_loader.cc, sweep files in sweep_loader.cc, the file header in file_kind.cc.
#include "sim/spec/loader.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <string_view>
#include <tuple>
#include <vector>

#include "sim/spec/file_kind.h"
#include "sim/spec/hardware_sections.h"
#include "sim/spec/model_sections.h"
#include "sim/spec/run_options.h"
#include "sim/spec/yaml_reader.h"

namespace moesim {
namespace {

namespace fs = std::filesystem;
using namespace detail;  // the shared section readers and ranges (hardware_sections.h)

const std::vector<std::string> kGpuKeys =
    with_header({"peak_flops", "hbm_bandwidth", "hbm_efficiency", "hbm_capacity",
                 "kernel_launch_overhead", "sm_count", "gemm_tile", "gemm_efficiency",
                 "gemm_tile_overhead", "gemm_half_tile_efficiency"});
const std::vector<std::string> kNodeKeys =
    with_header({"gpu", "gpus_per_node", "loopback", "intra_node", "pcie", "host_memory", "interference", "topology",
                 "nccl",
                 "calibration"});
const std::vector<std::string> kAlphaBetaKeys = {"all_to_all", "gemm", "simulate"};
const std::vector<std::string> kClusterKeys =
    with_header({"node", "num_nodes", "inter_node", "fabric", "alpha_beta"});
// A node file loaded on its own is a one-node cluster and may carry the cluster-level alpha_beta.
std::vector<std::string> top_level_node_keys() {
  std::vector<std::string> keys = kNodeKeys;
  keys.push_back("alpha_beta");
  return keys;
}

std::vector<std::string> all_hardware_keys() {
  std::vector<std::string> keys = kGpuKeys;
  const std::vector<std::string> node_keys = top_level_node_keys();
  for (const auto* extra : {&node_keys, &kClusterKeys, &detail::model_keys(), &detail::calibration_keys()}) {
    for (const std::string& k : *extra) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  return keys;
}

// A device name "<kind><index>" of a node topology, checked against the devices the node has.
TopoDevice read_device(const YamlValue& v, const NodeTopology& topo, int gpus_per_node) {
  static const std::vector<std::pair<std::string, TopoDeviceKind>> kPrefixes = {
      {"nvswitch", TopoDeviceKind::kNvSwitch}, {"gpu", TopoDeviceKind::kGpu},
      {"pcie", TopoDeviceKind::kPcieSwitch},   {"cpu", TopoDeviceKind::kCpu},
      {"nic", TopoDeviceKind::kNic}};
  const std::string name = v.as_name();
  std::string valid;
  for (const auto& [prefix, kind] : kPrefixes) {
    const int n = topo.count(kind, gpus_per_node);
    if (n > 0) valid += (valid.empty() ? "" : ", ") + prefix + "0.." + prefix + std::to_string(n - 1);
  }
  for (const auto& [prefix, kind] : kPrefixes) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 6 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      break;
    const int index = std::stoi(digits);
    if (index < topo.count(kind, gpus_per_node)) return TopoDevice{kind, index};
    break;
  }
  v.fail("unknown device '" + name + "' (a link must join devices the node has); devices: " + valid);
}

// Union-find over the devices, to reject GPUs (and NICs) that no link path reaches.
class DeviceSets {
 public:
  explicit DeviceSets(std::size_t n) : parent_(n) {
    for (std::size_t i = 0; i < n; ++i) parent_[i] = i;
  }
  std::size_t find(std::size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void join(std::size_t a, std::size_t b) { parent_[find(a)] = find(b); }

 private:
  std::vector<std::size_t> parent_;
};

// nic_port and gpu_nic (one NIC per GPU), which a node with NICs needs and one without refuses.
void read_nics(const YamlMap& m, int gpus_per_node, NodeTopology& topo) {
  if (topo.num_nics > 0) {
    topo.nic_port = read_link(m.require("nic_port"), kNetworkRange);
    const YamlValue gn = m.require("gpu_nic");
    const std::vector<YamlValue> items = gn.as_sequence();
    if (static_cast<int>(items.size()) != gpus_per_node)
      gn.fail("lists " + std::to_string(items.size()) + " NICs; it needs one per GPU (gpus_per_node = " +
              std::to_string(gpus_per_node) + ")");
    for (const YamlValue& item : items) {
      const TopoDevice d = read_device(item, topo, gpus_per_node);
      if (d.kind != TopoDeviceKind::kNic) item.fail("expected a NIC name (nic<i>), found '" + item.as_string() + "'");
      topo.gpu_nic.push_back(d.index);
    }
  } else {
    for (const char* key : {"nic_port", "gpu_nic"}) {
      if (auto k = m.get(key)) k->fail(std::string(key) + " needs nics > 0");
    }
  }
}

// The device's index among all of the node's devices, kind by kind (GPUs first).
std::size_t flat_index(const NodeTopology& topo, int gpus_per_node, TopoDevice d) {
  int offset = 0;
  for (int k = 0; k < static_cast<int>(d.kind); ++k) offset += topo.count(static_cast<TopoDeviceKind>(k), gpus_per_node);
  return static_cast<std::size_t>(offset + d.index);
}

// One entry of links: two different devices, a declared link type, and no earlier link between them.
TopoLink read_topo_link(const YamlValue& item, const NodeTopology& topo, const std::vector<std::string>& type_names,
                        int gpus_per_node) {
  const YamlMap lm = item.as_map({"ends", "type", "count"});
  const YamlValue ends = lm.require("ends");
  const std::vector<YamlValue> e = ends.as_sequence();
  if (e.size() != 2) ends.fail("a link has exactly two ends, found " + std::to_string(e.size()));
  TopoLink link;
  link.origin = item.location();
  link.a = read_device(e[0], topo, gpus_per_node);
  link.b = read_device(e[1], topo, gpus_per_node);
  if (link.a == link.b) ends.fail("a link must join two different devices");
  const YamlValue type = lm.require("type");
  link.type = type.as_name();
  if (topo.link_types.count(link.type) == 0) {
    std::string suggestion;
    for (const std::string& t : type_names)
      if (edit_distance(t, link.type) <= 2) suggestion = "; did you mean '" + t + "'?";
    type.fail("unknown link type '" + link.type + "'" + suggestion +
              " (link_types: " + YamlValue::join_names(type_names) + ")");
  }
  if (auto c = lm.get("count")) link.count = static_cast<int>(c->as_int(1, 64));
  for (const TopoLink& other : topo.links) {
    if ((other.a == link.a && other.b == link.b) || (other.a == link.b && other.b == link.a))
      ends.fail("duplicate link " + topo_device_name(link.a) + " - " + topo_device_name(link.b) +
                " (first given at line " + std::to_string(other.origin.line) +
                "); give parallel lanes with count");
  }
  return link;
}

// Every GPU must reach GPU 0 (intra-node traffic) and its NIC (inter-node traffic).
void check_gpus_connected(const NodeTopology& topo, int gpus_per_node, DeviceSets& sets, const YamlValue& links) {
  const auto flat = [&](TopoDevice d) { return flat_index(topo, gpus_per_node, d); };
  for (int g = 0; g < gpus_per_node; ++g) {
    const TopoDevice gpu{TopoDeviceKind::kGpu, g};
    if (sets.find(flat(gpu)) != sets.find(flat({TopoDeviceKind::kGpu, 0})))
      links.fail("gpu" + std::to_string(g) + " is disconnected: no path of links joins it to gpu0");
    if (!topo.gpu_nic.empty()) {
      const TopoDevice nic{TopoDeviceKind::kNic, topo.gpu_nic[static_cast<std::size_t>(g)]};
      if (sets.find(flat(gpu)) != sets.find(flat(nic)))
        links.fail("gpu" + std::to_string(g) + " cannot reach its NIC " + topo_device_name(nic) +
                   ": no path of links joins them");
    }
  }
}

NodeTopology read_topology(const YamlValue& v, int gpus_per_node) {
  const YamlMap m = v.as_map({"link_types", "nvswitches", "pcie_switches", "cpus", "nics",
                              "nic_port", "gpu_nic", "links"});
  NodeTopology topo;
  topo.present = true;
  topo.origin = v.location();
  if (auto n = m.get("nvswitches")) topo.num_nvswitches = static_cast<int>(n->as_int(0, 64));
  if (auto n = m.get("pcie_switches")) topo.num_pcie_switches = static_cast<int>(n->as_int(0, 64));
  if (auto n = m.get("cpus")) topo.num_cpus = static_cast<int>(n->as_int(0, 64));
  if (auto n = m.get("nics")) topo.num_nics = static_cast<int>(n->as_int(0, 64));

  std::vector<std::string> type_names;  // in the file's order
  topo.link_types = read_link_types(m.require("link_types"), &type_names);
  read_nics(m, gpus_per_node, topo);

  const YamlValue links = m.require("links");
  const int num_devices = gpus_per_node + topo.num_nvswitches + topo.num_pcie_switches +
                          topo.num_cpus + topo.num_nics;
  DeviceSets sets(static_cast<std::size_t>(num_devices));
  for (const YamlValue& item : links.as_sequence()) {
    TopoLink link = read_topo_link(item, topo, type_names, gpus_per_node);
    sets.join(flat_index(topo, gpus_per_node, link.a), flat_index(topo, gpus_per_node, link.b));
    topo.links.push_back(std::move(link));
  }
  check_gpus_connected(topo, gpus_per_node, sets, links);
  return topo;
}

FabricSpec read_fabric(const YamlValue& v) {
  const YamlMap m = v.as_map({"type", "nodes_per_leaf", "oversubscription"});
  FabricSpec f;
  f.present = true;
  f.origin = v.location();
  const std::string type = m.require("type").as_string();
  if (type == "fat_tree") {
    f.kind = FabricKind::kFatTree;
  } else if (type == "rail_optimized") {
    f.kind = FabricKind::kRailOptimized;
  } else {
    m.require("type").fail("unknown fabric type '" + type + "'; valid values: fat_tree, rail_optimized");
  }
  f.nodes_per_leaf = static_cast<int>(m.require("nodes_per_leaf").as_int(1, 1 << 16));
  if (auto o = m.get("oversubscription")) f.oversubscription = o->as_double(1, 1024);
  return f;
}

// Files being loaded, outermost first, to name a reference cycle.
using LoadStack = std::vector<std::string>;

GpuSpec read_gpu(const YamlMap& m);
NodeSpec read_node(const YamlMap& m, LoadStack& stack);

// Resolves a reference (a path relative to the referencing file) and reads it with `read`.
template <typename Read>
auto read_reference(const YamlValue& ref, std::string_view kind,
                    const std::vector<std::string>& keys, LoadStack& stack, Read read) {
  const std::string rel = ref.as_name();
  const fs::path base = fs::path(ref.file()).parent_path();
  const fs::path target = fs::path(rel).is_absolute() ? fs::path(rel) : base / rel;
  std::error_code ec;
  if (!fs::exists(target, ec)) {
    ref.fail("cannot open referenced " + std::string(kind) + " file '" + target.string() +
             "': no such file");
  }
  const std::string canonical = fs::weakly_canonical(target, ec).string();
  if (std::find(stack.begin(), stack.end(), canonical) != stack.end()) {
    std::string chain;
    for (const std::string& s : stack) chain += s + " -> ";
    ref.fail("reference cycle: " + chain + canonical);
  }
  stack.push_back(canonical);
  const YamlValue root = parse_yaml_file(target.string());
  check_file_kind(root, {std::string(kind)},
                  "the " + ref.key_path() + ": key of " + fs::path(ref.file()).filename().string());
  const YamlMap m = root.as_map(keys);
  check_header(m, kind, true, true);
  auto spec = read(m);
  stack.pop_back();
  return spec;
}

// A sub-spec given either inline (a map, schema_version and kind optional) or as a path to its
// own file; `a_kind` is the article and kind for the message ("a GPU").
template <typename Read>
auto read_inline_or_reference(const YamlValue& v, std::string_view kind, std::string_view a_kind,
                              const std::vector<std::string>& keys, LoadStack& stack, Read read) {
  if (v.is_map()) {
    const YamlMap inline_map = v.as_map(keys);
    check_header(inline_map, kind, false, false);
    return read(inline_map);
  }
  if (!v.is_scalar()) {
    v.fail("expected a path to " + std::string(a_kind) + " file or an inline " +
           std::string(a_kind.substr(a_kind.find(' ') + 1)) + " map");
  }
  return read_reference(v, kind, keys, stack, read);
}

GpuSpec read_gpu(const YamlMap& m) {
  GpuSpec gpu;
  gpu.name = m.require("name").as_name();
  gpu.origin = origin_of(m);
  const YamlMap flops =
      m.require("peak_flops").as_map({"fp32", "tf32", "bf16", "fp16", "fp8"});
  flops.require("fp32");  // every GPU computes fp32; the others are optional
  for (DType d : {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16, DType::kFp8}) {
    if (auto f = flops.get(to_string(d))) gpu.peak_flops[d] = f->as_flop_rate(kFlopRange);
  }
  gpu.hbm_bandwidth = m.require("hbm_bandwidth").as_bandwidth(kHbmRange);
  if (auto e = m.get("hbm_efficiency")) gpu.hbm_efficiency = e->as_double(0, 1, true);
  gpu.hbm_capacity_bytes = m.require("hbm_capacity").as_size_bytes(1);
  gpu.kernel_launch_ns = m.require("kernel_launch_overhead").as_time(kMaxLaunchNs);
  gpu.sm_count = static_cast<int>(m.require("sm_count").as_int(1, 100000));
  read_gemm_kernel(m, gpu);
  return gpu;
}

NodeSpec read_node(const YamlMap& m, LoadStack& stack) {
  NodeSpec node;
  node.name = m.require("name").as_name();
  node.origin = origin_of(m);
  node.gpu = read_inline_or_reference(m.require("gpu"), "gpu", "a GPU", kGpuKeys, stack,
                                      [](const YamlMap& g) { return read_gpu(g); });
  node.gpus_per_node = static_cast<int>(m.require("gpus_per_node").as_int(1, 1024));
  if (auto l = m.get("loopback")) node.loopback = l->as_bool();
  if (node.loopback) {
    // The virtual ranks exchange through the GPU's own memory; a link between them would be ignored.
    for (const char* key : {"intra_node", "topology"}) {
      if (auto v = m.get(key))
        v->fail(std::string(key) + " does not apply to a loopback node: its virtual ranks share one GPU and "
                "exchange through its memory (hbm_bandwidth)");
    }
  }
  if (auto intra = m.get("intra_node")) {
    node.intra_node = read_link(*intra, kIntraNodeRange);
  } else if (node.gpus_per_node > 1 && !node.loopback) {
    m.fail("missing required key 'intra_node' (needed when gpus_per_node = " +
           std::to_string(node.gpus_per_node) + " > 1)");
  }
  const YamlMap pcie =
      m.require("pcie").as_map({"h2d_bandwidth", "d2h_bandwidth", "efficiency", "latency", "copy_engines"});
  node.pcie_h2d.bandwidth = pcie.require("h2d_bandwidth").as_bandwidth(kPcieRange);
  node.pcie_d2h.bandwidth = pcie.require("d2h_bandwidth").as_bandwidth(kPcieRange);
  if (auto e = pcie.get("efficiency")) {
    node.pcie_h2d.efficiency = node.pcie_d2h.efficiency = e->as_double(0, 1, true);
  }
  node.pcie_h2d.latency_ns = node.pcie_d2h.latency_ns =
      pcie.require("latency").as_time(kMaxLatencyNs);
  if (auto e = pcie.get("copy_engines")) node.copy_engines = static_cast<int>(e->as_int(1, kMaxCopyEngines));
  if (auto h = m.get("host_memory")) {
    const YamlMap host = h->as_map({"bandwidth", "efficiency"});
    node.host_memory.bandwidth = host.require("bandwidth").as_bandwidth(kHostMemoryRange);
    node.host_memory.efficiency = 1.0;
    if (auto e = host.get("efficiency")) node.host_memory.efficiency = e->as_double(0, 1, true);
  }
  if (auto i = m.get("interference"))  // a GPU always has an sm_count, which the GEMM-size table needs
    for (const InterferenceCell& c : read_interference_cells(*i, &node.interference.gemm_with_communication))
      node.interference.set(c);
  if (auto t = m.get("topology")) node.topology = read_topology(*t, node.gpus_per_node);
  if (auto n = m.get("nccl")) node.nccl = read_nccl_tuning(*n);
  if (auto c = m.get("calibration")) {
    apply_calibration(node, read_reference(*c, "calibration", detail::calibration_keys(), stack,
                                           [](const YamlMap& cm) { return detail::read_calibration(cm); }));
  }
  return node;
}

LinkSpec read_inter_node(const YamlValue& v, int gpus_per_node) {
  const YamlMap m =
      v.as_map({"bandwidth_per_gpu", "nic_bandwidth", "nics_per_node", "efficiency", "latency"});
  LinkSpec link;
  const auto per_gpu = m.get("bandwidth_per_gpu");
  const auto nic = m.get("nic_bandwidth");
  const auto nics = m.get("nics_per_node");
  if (per_gpu && (nic || nics)) {
    (nic ? *nic : *nics)
        .fail("give either bandwidth_per_gpu or nic_bandwidth + nics_per_node, not both");
  }
  if (per_gpu) {
    link.bandwidth = per_gpu->as_bandwidth(kNetworkRange);
  } else if (nic && nics) {
    const double nic_bw = nic->as_bandwidth(kNetworkRange);
    const auto count = nics->as_int(1, 1024);
    // g GPUs sharing the node's NICs each get 1/g of their aggregate.
    link.bandwidth = nic_bw * static_cast<double>(count) / gpus_per_node;
  } else if (nic || nics) {
    m.fail(std::string("missing required key '") + (nic ? "nics_per_node" : "nic_bandwidth") +
           "' (nic_bandwidth and nics_per_node go together)");
  } else {
    m.fail("missing bandwidth: give bandwidth_per_gpu or nic_bandwidth + nics_per_node");
  }
  if (auto e = m.get("efficiency")) link.efficiency = e->as_double(0, 1, true);
  link.latency_ns = m.require("latency").as_time(kMaxLatencyNs);
  return link;
}

// One linear cost: `alpha` (a time) plus exactly one of `rate_key` (a bandwidth or FLOP rate,
// beta = 1 / rate) or `beta_key` (seconds per unit as a plain number, to enter published constants).
std::pair<double, double> read_linear_cost(const YamlValue& v, const std::string& rate_key,
                                           const std::string& beta_key, bool flops) {
  const YamlMap m = v.as_map({"alpha", rate_key, beta_key});
  const double alpha_s = static_cast<double>(m.require("alpha").as_time(kMaxLatencyNs)) / kNsPerS;
  const auto rate = m.get(rate_key);
  const auto beta = m.get(beta_key);
  if (rate && beta) beta->fail("give either " + rate_key + " or " + beta_key + ", not both");
  if (!rate && !beta) m.fail("missing the per-unit cost: give " + rate_key + " or " + beta_key);
  if (beta) return {alpha_s, beta->as_double(0, 1, true)};
  // The rate ranges are wide on purpose: alpha-beta files describe fitted or published channels,
  // not a datasheet, but a unit slip by 10^3 still lands outside them.
  const double r = flops ? rate->as_flop_rate(kFlopRange) : rate->as_bandwidth(PlausibleRange{1e6, 50e12});
  return {alpha_s, 1.0 / r};
}

AlphaBetaCosts read_alpha_beta(const YamlValue& v) {
  const YamlMap m = v.as_map(kAlphaBetaKeys);
  AlphaBetaCosts ab;
  ab.origin = v.location();
  std::tie(ab.a2a_alpha_s, ab.a2a_beta_s_per_byte) =
      read_linear_cost(m.require("all_to_all"), "bandwidth", "beta_s_per_byte", false);
  std::tie(ab.gemm_alpha_s, ab.gemm_beta_s_per_flop) =
      read_linear_cost(m.require("gemm"), "flop_rate", "beta_s_per_flop", true);
  if (auto s = m.get("simulate")) ab.simulate = s->as_bool();
  return ab;
}

// A loopback node is one GPU: a cluster of them is not one machine the runtime can run, and pure
// alpha-beta costs would ignore what the virtual ranks share.
void check_loopback(const ClusterSpec& cluster, const YamlMap& m) {
  if (!cluster.node.loopback) return;
  if (cluster.num_nodes > 1)
    m.require("num_nodes").fail("a cluster of loopback nodes is not supported: a loopback node's virtual ranks "
                                "share one GPU (num_nodes must be 1)");
  if (cluster.pure_alpha_beta())
    m.require("alpha_beta").as_map(kAlphaBetaKeys).require("simulate").fail(
        "costing every task with PipeMoE's constants cannot model virtual ranks sharing a GPU (loopback: true); "
        "drop simulate or loopback");
}

ClusterSpec read_cluster(const YamlMap& m, LoadStack& stack) {
  ClusterSpec cluster;
  cluster.name = m.require("name").as_name();
  cluster.origin = origin_of(m);
  cluster.node = read_inline_or_reference(m.require("node"), "node", "a node", kNodeKeys, stack,
                                          [&stack](const YamlMap& n) { return read_node(n, stack); });
  const YamlValue num_nodes = m.require("num_nodes");
  cluster.num_nodes = static_cast<int>(num_nodes.as_int(1, kMaxClusterNodes));
  if (static_cast<std::int64_t>(cluster.num_nodes) * cluster.node.gpus_per_node > kMaxClusterGpus)
    num_nodes.fail(std::to_string(cluster.num_nodes) + " nodes of " + std::to_string(cluster.node.gpus_per_node) +
                   " GPUs are more than the limit of " + std::to_string(kMaxClusterGpus) + " GPUs in a cluster");
  if (auto inter = m.get("inter_node")) {
    cluster.inter_node = read_inter_node(*inter, cluster.node.gpus_per_node);
  } else if (cluster.num_nodes > 1) {
    m.fail("missing required key 'inter_node' (needed when num_nodes = " +
           std::to_string(cluster.num_nodes) + " > 1)");
  }
  // The node's calibration measured what its GPUs reach across nodes: that replaces the file's.
  if (cluster.node.calibrated_inter_node) cluster.inter_node = *cluster.node.calibrated_inter_node;
  if (auto f = m.get("fabric")) {
    cluster.fabric = read_fabric(*f);
    if (!cluster.node.topology.present || cluster.node.topology.num_nics == 0)
      f->fail("a fabric needs a node with a topology section that has NICs (nics > 0)");
  }
  if (auto ab = m.get("alpha_beta")) cluster.alpha_beta = read_alpha_beta(*ab);
  check_loopback(cluster, m);
  return cluster;
}

ClusterSpec read_hardware_file(const YamlValue& root) {
  check_file_kind(root, {"gpu", "node", "cluster"}, "--hardware");
  // Which keys are allowed depends on the kind, so the header is read first.
  const std::string kind = check_header(root.as_map(all_hardware_keys()), "", true, true);
  std::error_code ec;
  LoadStack stack{fs::weakly_canonical(root.file(), ec).string()};
  if (kind == "cluster") return read_cluster(root.as_map(kClusterKeys), stack);
  ClusterSpec cluster;
  if (kind == "node") {
    const YamlMap m = root.as_map(top_level_node_keys());
    cluster.node = read_node(m, stack);
    if (cluster.node.calibrated_inter_node) cluster.inter_node = *cluster.node.calibrated_inter_node;
    if (auto ab = m.get("alpha_beta")) cluster.alpha_beta = read_alpha_beta(*ab);
    check_loopback(cluster, m);
  } else {
    // A GPU alone: one GPU, no interconnect and no host link described.
    cluster.node.gpu = read_gpu(root.as_map(kGpuKeys));
    cluster.node.name = cluster.node.gpu.name;
    cluster.node.origin = cluster.node.gpu.origin;
    cluster.node.gpus_per_node = 1;
  }
  cluster.name = cluster.node.name;
  cluster.origin = cluster.node.origin;
  cluster.num_nodes = 1;
  return cluster;
}

}  // namespace

ModelSpec load_model_spec(const std::string& path) { return read_model_file(parse_yaml_file(path)); }
ModelSpec parse_model_spec(const std::string& text, const std::string& file) {
  return read_model_file(parse_yaml_text(text, file));
}

ClusterSpec load_hardware_spec(const std::string& path) { return read_hardware_file(parse_yaml_file(path)); }
ClusterSpec parse_hardware_spec(const std::string& text, const std::string& file) {
  return read_hardware_file(parse_yaml_text(text, file));
}

ClusterSpec load_hardware_spec(const std::string& path, const std::string& calibration_path) {
  ClusterSpec cluster = load_hardware_spec(path);
  if (!calibration_path.empty()) apply_calibration(cluster, load_calibration(calibration_path));
  return cluster;
}

namespace {

RunFile read_run_file(const YamlValue& root) {
  check_file_kind(root, {"run"}, "--run");
  std::vector<std::string> keys{"schema_version", "kind", "name", "source", "model", "hardware"};
  for (const RunOption& o : run_options()) keys.push_back(o.key);
  const YamlMap m = root.as_map(keys);
  check_header(m, "run", true, true);
  check_source(m);
  if (auto n = m.get("name")) n->as_name();
  RunFile out;
  const fs::path base = fs::path(root.file()).parent_path();
  const auto resolve = [&](const YamlValue& v) {
    const std::string rel = v.as_string();
    if (rel.empty()) v.fail("expected a file path, got an empty string");
    return (fs::path(rel).is_absolute() ? fs::path(rel) : base / rel).lexically_normal().string();
  };
  if (auto v = m.get("model")) out.model_path = resolve(*v);
  if (auto v = m.get("hardware")) out.hardware_path = resolve(*v);
  for (const RunOption& o : run_options()) {
    if (o.required) o.read(out.run, m.require(o.key), base.string());
    else if (auto v = m.get(o.key)) o.read(out.run, *v, base.string());
  }
  return out;
}

}  // namespace

RunFile load_run_spec(const std::string& path) { return read_run_file(parse_yaml_file(path)); }
RunFile parse_run_spec(const std::string& text, const std::string& file) {
  return read_run_file(parse_yaml_text(text, file));
}

}  // namespace moesim
