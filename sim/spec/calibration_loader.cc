// Calibration files (kind: calibration): reading them and applying one to a node.
#include <string>
#include <vector>

#include "sim/spec/file_kind.h"
#include "sim/spec/hardware_sections.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace detail {

const std::vector<std::string>& calibration_keys() {
  static const std::vector<std::string> keys =
      with_header({"gpu", "device", "kernel_launch_overhead", "hbm_bandwidth", "pcie", "interference", "gemm",
                   "batched_gemm", "batched_gemm_nt", "batched_gemm_tn", "kernels", "device_copy_collectives", "intra_node", "link_types", "all_to_all", "inter_node", "nic_port",
                   "inter_node_all_to_all", "nccl", "all_reduce"});
  return keys;
}

namespace {

// Measured GEMM times are plain numbers of microseconds (time_us); a point outside (0, 10 s] is a
// unit slip or a failed measurement.
constexpr double kMaxGemmTimeUs = 1e7;

// One axis of a GEMM table: a non-empty, strictly increasing list of dimensions.
std::vector<std::int64_t> read_gemm_axis(const YamlMap& table, const char* key) {
  const YamlValue v = table.require(key);
  std::vector<std::int64_t> axis;
  for (const YamlValue& item : v.as_sequence()) {
    const std::int64_t d = item.as_int(1, std::int64_t{1} << 24);
    if (!axis.empty() && d <= axis.back()) {
      item.fail("the " + std::string(key) + " axis must be strictly increasing; " + std::to_string(d) +
                " follows " + std::to_string(axis.back()));
    }
    axis.push_back(d);
  }
  if (axis.empty()) v.fail("the " + std::string(key) + " axis is empty; give at least one dimension");
  return axis;
}

// The times of a table's rows, each of `per_row` microseconds (one per k), in ns.
std::vector<double> read_time_rows(const std::vector<YamlValue>& rows, std::size_t per_row) {
  std::vector<double> ns;
  ns.reserve(rows.size() * per_row);
  for (const YamlValue& row : rows) {
    const std::vector<YamlValue> cells = row.as_sequence();
    if (cells.size() != per_row)
      row.fail("has " + std::to_string(cells.size()) + " times; it needs one per k (" + std::to_string(per_row) + ")");
    for (const YamlValue& c : cells) ns.push_back(c.as_double(0, kMaxGemmTimeUs, true) * 1e3);
  }
  return ns;
}

// gemm.<dtype>: {m: [...], n: [...], k: [...], time_us: one row per (m, n), m-major, of |k| times}.
GemmTimeTable read_gemm_table(const YamlValue& v) {
  const YamlMap m = v.as_map({"m", "n", "k", "time_us"});
  GemmTimeTable t;
  t.m = read_gemm_axis(m, "m");
  t.n = read_gemm_axis(m, "n");
  t.k = read_gemm_axis(m, "k");
  const YamlValue times = m.require("time_us");
  const std::vector<YamlValue> rows = times.as_sequence();
  if (rows.size() != t.m.size() * t.n.size()) {
    times.fail("has " + std::to_string(rows.size()) + " rows; it needs one per (m, n) pair, m-major: " +
               std::to_string(t.m.size()) + " x " + std::to_string(t.n.size()) + " = " +
               std::to_string(t.m.size() * t.n.size()));
  }
  t.time_ns = read_time_rows(rows, t.k.size());
  return t;
}

// batched_gemm[_nt|_tn].<dtype>: {batch, m, n, k: axes, time_us: one row per (batch, m, n), batch-major then
// m, of |k| times}. A missing row or time is a hole in the grid the interpolation cannot bridge.
BatchedGemmTable read_batched_gemm_table(const YamlValue& v) {
  const YamlMap m = v.as_map({"batch", "m", "n", "k", "time_us"});
  BatchedGemmTable t;
  t.batch = read_gemm_axis(m, "batch");
  if (t.batch.front() < 2) m.require("batch").fail("the batch axis starts at 2: a batch of 1 is a single GEMM, which the gemm table prices");
  t.m = read_gemm_axis(m, "m");
  t.n = read_gemm_axis(m, "n");
  t.k = read_gemm_axis(m, "k");
  const YamlValue times = m.require("time_us");
  const std::vector<YamlValue> rows = times.as_sequence();
  const std::size_t want = t.batch.size() * t.m.size() * t.n.size();
  if (rows.size() != want) {
    times.fail("has " + std::to_string(rows.size()) + " rows; it needs one per (batch, m, n), batch-major then m: " +
               std::to_string(t.batch.size()) + " x " + std::to_string(t.m.size()) + " x " +
               std::to_string(t.n.size()) + " = " + std::to_string(want));
  }
  t.time_ns = read_time_rows(rows, t.k.size());
  return t;
}

// Effective bandwidths of the memory-bound kernels: from a slow scatter over few bytes to HBM.
constexpr PlausibleRange kKernelBandwidthRange{0.1e9, 50e12};

// kernels.<storage>: {route_fwd: {launch: time, bandwidth: rate}, ...}.
KernelFigures read_kernel_figures(const YamlValue& v) {
  std::vector<std::string> names;
  for (MemoryKernel k : kMemoryKernels) names.emplace_back(to_string(k));
  const YamlMap m = v.as_map(names);
  KernelFigures out;
  for (MemoryKernel k : kMemoryKernels) {
    const auto f = m.get(std::string(to_string(k)));
    if (!f) continue;
    const YamlMap fig = f->as_map({"launch", "bandwidth"});
    out[k] = KernelFigure{fig.require("launch").as_time(kMaxLaunchNs),
                          fig.require("bandwidth").as_bandwidth(kKernelBandwidthRange)};
  }
  return out;
}

// The sections a calibration file may hold only from schema_version 2 on (the per-layout batched
// tables came later in version 2: an older reader refuses them as unknown keys).
std::vector<std::string> version2_sections() {
  return {batched_gemm_section(GemmLayout::kNN), batched_gemm_section(GemmLayout::kNT),
          batched_gemm_section(GemmLayout::kTN), "kernels", "device_copy_collectives"};
}

// A device-copy collective's fixed cost: p^2 copies issued by one host thread and the events
// around them, far above one kernel's launch at large p; beyond this a measurement failed.
constexpr TimeNs kMaxDeviceCopyLaunchNs = 100'000'000;  // 100 ms
// The loopback ranks `moesim calibrate --loopback-ranks` may measure (the virtual ranks of one GPU).
constexpr std::int64_t kMaxDeviceCopyRanks = kMaxLoopbackRanks;

// device_copy_collectives: {fits: [{ranks: p, launch: time, bandwidth: rate}, ...] (p strictly
// increasing), with_computation: {factor: (0, 1], ranks: p, bytes_per_peer: n}}.
DeviceCopyFigures read_device_copy_collectives(const YamlValue& v) {
  const YamlMap m = v.as_map({"fits", "with_computation"});
  DeviceCopyFigures out;
  const YamlValue fits = m.require("fits");
  for (const YamlValue& item : fits.as_sequence()) {
    const YamlMap fit = item.as_map({"ranks", "launch", "bandwidth"});
    const YamlValue ranks = fit.require("ranks");
    const auto p = static_cast<int>(ranks.as_int(1, kMaxDeviceCopyRanks));
    if (!out.by_ranks.empty() && p <= out.by_ranks.rbegin()->first) {
      ranks.fail("the fits' ranks must be strictly increasing; " + std::to_string(p) + " follows " +
                 std::to_string(out.by_ranks.rbegin()->first));
    }
    out.by_ranks[p] = KernelFigure{fit.require("launch").as_time(kMaxDeviceCopyLaunchNs),
                                   fit.require("bandwidth").as_bandwidth(kKernelBandwidthRange)};
  }
  if (out.by_ranks.empty()) fits.fail("no fit; give one {ranks, launch, bandwidth} per measured rank count");
  if (auto w = m.get("with_computation")) {
    const YamlMap probe = w->as_map({"factor", "ranks", "bytes_per_peer"});
    out.with_computation = DeviceCopyFigures::Probe{probe.require("factor").as_double(0, 1, true),
                                                    static_cast<int>(probe.require("ranks").as_int(1, kMaxDeviceCopyRanks)),
                                                    probe.require("bytes_per_peer").as_int(1, std::int64_t{1} << 40)};
  }
  return out;
}

// The sections a calibration file may hold only from schema_version 2 on.
void read_version2_sections(const YamlMap& m, CalibrationSpec& cal) {
  for (const std::string& key : version2_sections()) {
    if (auto v = m.get(key); v && schema_version(m) < 2)
      v->fail(key + " needs schema_version 2 (this file says 1): files that hold it are read since then");
  }
  for (GemmLayout layout : {GemmLayout::kNN, GemmLayout::kNT, GemmLayout::kTN}) {
    const auto g = m.get(batched_gemm_section(layout));
    if (!g) continue;
    const YamlMap tables = g->as_map({"fp32", "tf32", "bf16", "fp16"});
    for (DType d : {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16}) {
      if (auto t = tables.get(to_string(d))) cal.batched_gemm[layout][d] = read_batched_gemm_table(*t);
    }
  }
  if (auto k = m.get("kernels")) {
    const YamlMap storages = k->as_map({"fp32", "bf16", "fp16"});
    for (DType d : {DType::kFp32, DType::kBf16, DType::kFp16}) {
      if (auto f = storages.get(to_string(d))) cal.kernels[d] = read_kernel_figures(*f);
    }
  }
  if (auto d = m.get("device_copy_collectives")) cal.device_copies = read_device_copy_collectives(*d);
}

// A calibration's record of the all-to-all its network sections were fitted to; `nodes` (how many
// the GPUs were on) only for the inter-node record.
CalibrationSpec::AllToAllRecord read_all_to_all_record(const YamlValue& v, bool inter_node) {
  const YamlMap rec = inter_node ? v.as_map({"ranks", "nodes", "source", "bytes_per_peer", "time_us"})
                                 : v.as_map({"ranks", "source", "bytes_per_peer", "time_us"});
  CalibrationSpec::AllToAllRecord r;
  r.ranks = static_cast<int>(rec.require("ranks").as_int(2, 1 << 20));
  if (inter_node) r.nodes = static_cast<int>(rec.require("nodes").as_int(2, 1 << 20));
  if (auto src = rec.get("source")) r.source = src->as_string();
  for (const YamlValue& b : rec.require("bytes_per_peer").as_sequence()) r.bytes_per_peer.push_back(b.as_int(1, std::int64_t{1} << 40));
  const YamlValue times = rec.require("time_us");
  for (const YamlValue& t : times.as_sequence()) r.time_ns.push_back(t.as_double(0, 1e9, true) * 1e3);
  if (r.time_ns.size() != r.bytes_per_peer.size()) {
    times.fail("has " + std::to_string(r.time_ns.size()) + " times; it needs one per bytes_per_peer entry (" +
               std::to_string(r.bytes_per_peer.size()) + ")");
  }
  return r;
}

// The all-reduce an `nccl:` section was fitted to: one time per nccl-tests size.
CalibrationSpec::AllReduceRecord read_all_reduce_record(const YamlValue& v) {
  const YamlMap rec = v.as_map({"ranks", "nodes", "source", "bytes", "time_us"});
  CalibrationSpec::AllReduceRecord r;
  r.ranks = static_cast<int>(rec.require("ranks").as_int(2, 1 << 20));
  r.nodes = static_cast<int>(rec.require("nodes").as_int(1, 1 << 20));
  if (auto src = rec.get("source")) r.source = src->as_string();
  for (const YamlValue& b : rec.require("bytes").as_sequence()) r.bytes.push_back(b.as_int(1, std::int64_t{1} << 40));
  const YamlValue times = rec.require("time_us");
  for (const YamlValue& t : times.as_sequence()) r.time_ns.push_back(t.as_double(0, 1e9, true) * 1e3);
  if (r.time_ns.size() != r.bytes.size()) {
    times.fail("has " + std::to_string(r.time_ns.size()) + " times; it needs one per bytes entry (" +
               std::to_string(r.bytes.size()) + ")");
  }
  return r;
}

}  // namespace

CalibrationSpec read_calibration(const YamlMap& m) {
  CalibrationSpec cal;
  cal.origin = origin_of(m);
  cal.file = cal.origin.file;
  m.require("name").as_name();
  const YamlValue gpu = m.require("gpu");
  cal.gpu = gpu.as_name();
  cal.gpu_where = gpu.location();
  if (auto d = m.get("device")) cal.device = d->as_name();
  if (auto l = m.get("kernel_launch_overhead")) cal.kernel_launch_ns = l->as_time(kMaxLaunchNs);
  if (auto h = m.get("hbm_bandwidth")) cal.hbm_bandwidth = h->as_bandwidth(kHbmRange);
  if (auto p = m.get("pcie")) {
    const YamlMap pcie = p->as_map({"h2d_bandwidth", "d2h_bandwidth", "h2d_latency", "d2h_latency"});
    const auto link = [&pcie](const char* bw, const char* lat) {
      LinkSpec l;
      l.bandwidth = pcie.require(bw).as_bandwidth(kPcieRange);
      l.latency_ns = pcie.require(lat).as_time(kMaxLatencyNs);
      return l;
    };
    cal.pcie_h2d = link("h2d_bandwidth", "h2d_latency");
    cal.pcie_d2h = link("d2h_bandwidth", "d2h_latency");
  }
  if (auto i = m.get("interference")) cal.interference = read_interference_cells(*i);
  if (auto g = m.get("gemm")) {
    const YamlMap tables = g->as_map({"fp32", "tf32", "bf16", "fp16"});
    for (DType d : {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16}) {
      if (auto t = tables.get(to_string(d))) cal.gemm[d] = read_gemm_table(*t);
    }
  }
  read_version2_sections(m, cal);
  if (auto l = m.get("intra_node")) cal.intra_node = read_link(*l, kIntraNodeRange);
  if (auto t = m.get("link_types")) {
    cal.link_types = read_link_types(*t);
    cal.link_types_where = t->location();
  }
  if (auto a = m.get("all_to_all")) cal.all_to_all = read_all_to_all_record(*a, false);
  if (auto l = m.get("inter_node")) {
    cal.inter_node = read_link(*l, kNetworkRange);
    cal.inter_node_where = l->location();
  }
  if (auto l = m.get("nic_port")) {
    cal.nic_port = read_link(*l, kNetworkRange);
    cal.nic_port_where = l->location();
  }
  if (auto a = m.get("inter_node_all_to_all")) cal.inter_node_all_to_all = read_all_to_all_record(*a, true);
  if (auto n = m.get("nccl")) {
    cal.nccl = read_nccl_fitted_terms(*n);
    cal.nccl_where = n->location();
  }
  if (auto a = m.get("all_reduce")) cal.all_reduce = read_all_reduce_record(*a);
  return cal;
}

}  // namespace detail

namespace {

CalibrationSpec read_calibration_file(const YamlValue& root, const std::string& taker) {
  check_file_kind(root, {"calibration"}, taker);
  const YamlMap m = root.as_map(detail::calibration_keys());
  check_header(m, "calibration", true, true, kCalibrationSchemaVersion);
  return detail::read_calibration(m);
}

}  // namespace

CalibrationSpec load_calibration(const std::string& path, const std::string& taker) {
  return read_calibration_file(parse_yaml_file(path), taker);
}
CalibrationSpec parse_calibration(const std::string& text, const std::string& file, const std::string& taker) {
  return read_calibration_file(parse_yaml_text(text, file), taker);
}

void apply_calibration(NodeSpec& node, const CalibrationSpec& cal) {
  GpuSpec& gpu = node.gpu;
  if (cal.gpu != gpu.name) {
    throw InputError(cal.gpu_where, "gpu: this calibration was measured on '" + cal.gpu +
                                        "' and cannot be applied to '" + gpu.name + "' (" +
                                        gpu.origin.to_string() + "); calibrate that GPU or use its own file");
  }
  if (gpu.calibration) {
    throw InputError(cal.origin, "node '" + node.name + "' already has a calibration (" + gpu.calibration->file +
                                     "); give one calibration, in the node file or on the command line");
  }
  const auto check_dtype = [&](const char* section, DType dtype) {
    if (!gpu.peak_flops.count(dtype)) {
      throw InputError(cal.origin, std::string(section) + "." + std::string(to_string(dtype)) + ": GPU '" + gpu.name +
                                       "' has no peak_flops for " + std::string(to_string(dtype)) +
                                       ", so the simulator never runs GEMMs in it");
    }
  };
  for (const auto& [dtype, table] : cal.gemm) check_dtype("gemm", dtype);
  for (const auto& [layout, tables] : cal.batched_gemm)
    for (const auto& [dtype, table] : tables) check_dtype(batched_gemm_section(layout).c_str(), dtype);
  if (cal.intra_node) {
    if (node.gpus_per_node < 2 || node.loopback) {
      throw InputError(cal.origin, "intra_node: node '" + node.name + "' (" + node.origin.to_string() +
                                       ") has no link between GPUs to calibrate (one GPU, or a loopback node)");
    }
  }
  if (cal.nccl && (node.gpus_per_node < 2 || node.loopback)) {
    throw InputError(cal.nccl_where, "nccl: node '" + node.name + "' (" + node.origin.to_string() +
                                         ") runs no NCCL collective between GPUs (one GPU, or a loopback node)");
  }
  if ((cal.inter_node || cal.nic_port) && node.loopback) {
    throw InputError(cal.inter_node ? cal.inter_node_where : cal.nic_port_where,
                     std::string(cal.inter_node ? "inter_node" : "nic_port") + ": node '" + node.name + "' (" +
                         node.origin.to_string() + ") is a loopback node, whose ranks share one GPU: it has no network");
  }
  if (cal.nic_port && (!node.topology.present || node.topology.num_nics == 0)) {
    throw InputError(cal.nic_port_where, "nic_port: node '" + node.name + "' (" + node.origin.to_string() + ") has " +
                                             (node.topology.present ? "no NICs in its topology" : "no topology") +
                                             ", so the flow model has no NIC port to calibrate");
  }
  for (const auto& [type, link] : cal.link_types) {
    if (!node.topology.link_types.count(type)) {
      std::string names;
      for (const auto& [name, spec] : node.topology.link_types) names += (names.empty() ? "" : ", ") + name;
      throw InputError(cal.link_types_where,
                       "link_types." + type + ": node '" + node.name + "' (" + node.origin.to_string() + ") " +
                           (names.empty() ? "has no topology" : "has no link type '" + type + "'; it has " + names));
    }
  }
  if (cal.kernel_launch_ns) gpu.kernel_launch_ns = *cal.kernel_launch_ns;
  if (cal.hbm_bandwidth) {
    // Measured streaming bandwidth is what kernels reach: it replaces datasheet x efficiency.
    gpu.hbm_bandwidth = *cal.hbm_bandwidth;
    gpu.hbm_efficiency = 1.0;
  }
  if (cal.intra_node) node.intra_node = *cal.intra_node;
  for (const auto& [type, link] : cal.link_types) node.topology.link_types[type] = link;
  if (cal.nic_port) node.topology.nic_port = *cal.nic_port;
  if (cal.inter_node) node.calibrated_inter_node = *cal.inter_node;
  if (cal.nccl) cal.nccl->apply_to(node.nccl);
  if (cal.pcie_h2d) node.pcie_h2d = *cal.pcie_h2d;
  if (cal.pcie_d2h) node.pcie_d2h = *cal.pcie_d2h;
  for (const InterferenceCell& c : cal.interference) node.interference.set(c);
  gpu.calibration = GpuCalibration{cal.file, cal.device, cal.gemm, cal.batched_gemm, cal.kernels, cal.device_copies};
}

void apply_calibration(ClusterSpec& cluster, const CalibrationSpec& calibration) {
  apply_calibration(cluster.node, calibration);
  if (cluster.node.calibrated_inter_node) cluster.inter_node = *cluster.node.calibrated_inter_node;
}

}  // namespace moesim
