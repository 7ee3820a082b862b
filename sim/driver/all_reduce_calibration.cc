#include "sim/driver/all_reduce_calibration.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/driver/logged_gpus.h"
#include "sim/driver/nccl_tests_replay.h"
#include "sim/net/nccl_model.h"
#include "sim/spec/yaml_text.h"

namespace moesim {
namespace {

constexpr NcclAlgorithm kAlgorithms[] = {NcclAlgorithm::kRing, NcclAlgorithm::kTree};
constexpr NcclProtocol kProtocols[] = {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple};

double largest_efficiency(const NcclTuning& t) {
  double most = 0;
  for (const auto& row : t.efficiency)
    for (double e : row) most = std::max(most, e);
  return most;
}

// `base` with the hop row `hop` x h and every efficiency x e. Hop latencies are whole
// nanoseconds, as in a node file.
NcclTuning scaled(const NcclTuning& base, NcclHop hop, double h, double e) {
  NcclTuning t = base;
  for (auto& row : t.hop_latency[static_cast<std::size_t>(hop)])
    for (TimeNs& lat : row) lat = static_cast<TimeNs>(std::llround(static_cast<double>(lat) * h));
  for (auto& row : t.efficiency)
    for (double& x : row) x = std::min(1.0, x * e);
  return t;
}

// The all-reduce times `model` gives on `cluster` with NCCL constants `tuning`, per point.
std::vector<double> model_times(ClusterSpec cluster, const NcclTuning& tuning, const std::vector<int>& group,
                                NetworkModel model, const std::vector<AllReducePoint>& points) {
  cluster.node.nccl = tuning;
  const TaskGraph graph(cluster.num_gpus(), group);
  const auto net = make_collective_model(graph, cluster, NetworkChoice{model, AllToAllAlgorithm::kPairwise});
  std::vector<double> out;
  for (const AllReducePoint& p : points)
    out.push_back(static_cast<double>(simulate_nccl_tests_row(*net, CollectiveOp::kAllReduce, p.bytes, group)));
  return out;
}

void check_all_reduce_input(const ClusterSpec& cluster, const std::vector<int>& gpus,
                            const std::vector<AllReducePoint>& points) {
  const NodeSpec& node = cluster.node;
  if (node.loopback || cluster.num_gpus() < 2)
    throw InputError("'" + node.name + "' has no network between GPUs (one GPU, or a loopback node) to calibrate");
  if (gpus.size() < 2) throw InputError("an all-reduce calibration needs at least 2 GPUs, got " + std::to_string(gpus.size()));
  std::set<int> seen;
  for (int g : gpus)
    if (g < 0 || g >= cluster.num_gpus() || !seen.insert(g).second)
      throw InputError("GPU " + std::to_string(g) + " is outside '" + cluster.name + "' or in the all-reduce twice");
  std::set<std::int64_t> sizes;
  for (const AllReducePoint& p : points) {
    if (p.bytes <= 0 || !(p.time_ns > 0))
      throw InputError("an all-reduce point needs positive bytes and time, got " + std::to_string(p.bytes) + " bytes in " +
                       std::to_string(p.time_ns) + " ns");
    sizes.insert(p.bytes);
  }
  // Two factors, and a residual variance to judge them by.
  if (sizes.size() < 3)
    throw InputError("an all-reduce calibration needs at least three sizes, got " + std::to_string(sizes.size()));
}

// What the fit could not do, for the user.
void add_fit_notes(AllReduceCalibration& cal, double most_efficient) {
  const std::string row = std::string(to_string(cal.hop)) + " hop latencies";
  if (cal.hop_factor.at_bound && cal.hop_factor.value <= 0)
    cal.notes.push_back("the measured latency is below what NCCL's base latencies alone give: the " + row +
                        " are set to 0, the base latencies kept");
  if (cal.efficiency_factor.at_bound && cal.efficiency_factor.value * most_efficient >= 1 - 1e-9)
    cal.notes.push_back("the measured all-reduce is faster than the links allow at full efficiency: the efficiencies "
                        "stop at 1 (calibrate the links first, with --alltoall-log; or the all-reduce reduces in the "
                        "switches, NVLS or CollNet, which moesim does not model)");
  if (std::isinf(cal.hop_factor.standard_error))
    cal.notes.push_back("the log does not determine the " + row + " (no logged size depends on them)");
  if (std::isinf(cal.efficiency_factor.standard_error))
    cal.notes.push_back("the log does not determine the efficiencies (no logged size depends on them)");
}

}  // namespace

AllReduceCalibration calibrate_all_reduce(const ClusterSpec& cluster, const std::vector<int>& gpus,
                                          const std::vector<AllReducePoint>& points) {
  check_all_reduce_input(cluster, gpus, points);
  std::vector<int> group = gpus;
  std::sort(group.begin(), group.end());
  AllReduceCalibration cal;
  cal.nodes = nodes_holding(cluster, group);
  cal.hop = cal.nodes > 1 ? NcclHop::kNet : cluster.node.nccl.intra_hop;
  cal.model = resolve_network_model(cluster, NetworkModel::kAuto);
  const NcclTuning& base = cluster.node.nccl;
  const double most = largest_efficiency(base);
  const auto times = [&](const std::vector<double>& x) {
    return model_times(cluster, scaled(base, cal.hop, x[0], x[1]), group, cal.model, points);
  };
  std::vector<double> measured;
  for (const AllReducePoint& p : points) measured.push_back(p.time_ns);
  // Start the efficiency where the largest size, mostly bandwidth, says.
  std::size_t largest = 0;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (points[i].bytes > points[largest].bytes) largest = i;
  const double start = times({1.0, 1.0})[largest] / measured[largest];
  cal.fit = fit_relative(times, measured,
                         {{"hop factor", 1.0, 0.0, 1e3}, {"efficiency factor", start, 1e-3, 1.0 / most}});
  cal.hop_factor = cal.fit.parameters[0];
  cal.efficiency_factor = cal.fit.parameters[1];
  cal.tuning = scaled(base, cal.hop, cal.hop_factor.value, cal.efficiency_factor.value);
  ClusterSpec fitted = cluster;
  fitted.node.nccl = cal.tuning;
  const NcclGroup shape = nccl_group(group, cluster.node.gpus_per_node);
  const auto p = static_cast<std::int64_t>(group.size());
  for (const AllReducePoint& pt : points)
    cal.runs.push_back(choose_nccl(cal.tuning, CollectiveOp::kAllReduce, static_cast<double>((pt.bytes + p - 1) / p * p),
                                   shape, nccl_links(fitted, shape)));
  add_fit_notes(cal, most);
  // The other model, where the hardware has one, with the same constants.
  const NetworkModel other = cal.model == NetworkModel::kFlow ? NetworkModel::kAlphaBeta : NetworkModel::kFlow;
  try {
    const std::vector<double> t = model_times(cluster, cal.tuning, group, resolve_network_model(cluster, other), points);
    cal.other_model_max_error = 0;
    for (std::size_t i = 0; i < t.size(); ++i)
      cal.other_model_max_error = std::max(cal.other_model_max_error, std::abs(t[i] - measured[i]) / measured[i]);
  } catch (const InputError&) {
    // No topology (or fabric): the flow model cannot run here.
  }
  return cal;
}

namespace {

template <typename T, typename Write>
void table_yaml(std::ostringstream& y, const PerNcclAlgorithm<T>& table, const std::string& indent, Write write) {
  for (NcclAlgorithm a : kAlgorithms) {
    y << indent << to_string(a) << ": {";
    for (NcclProtocol q : kProtocols)
      y << (q == NcclProtocol::kLL ? "" : ", ") << to_string(q) << ": "
        << write(table[static_cast<std::size_t>(a)][static_cast<std::size_t>(q)]);
    y << "}\n";
  }
}

std::string factor_text(const FittedParameter& f) {
  return yaml_fixed(f.value, 4) + (std::isinf(f.standard_error) ? " (not determined)"
                                                                : " +- " + yaml_fixed(f.standard_error, 4));
}

}  // namespace

std::string all_reduce_calibration_yaml(const AllReduceCalibration& cal, int ranks,
                                        const std::vector<AllReducePoint>& points, const std::string& source) {
  std::ostringstream y;
  y << "# NCCL's all-reduce terms fitted to a measured all-reduce of " << ranks << " GPUs on " << cal.nodes << " node"
    << (cal.nodes == 1 ? "" : "s") << " (docs/calibration.md): " << to_string(cal.hop) << " hop latencies x "
    << factor_text(cal.hop_factor) << ", efficiencies x " << factor_text(cal.efficiency_factor) << ".\n"
    << "# Fitted on the " << to_string(cal.model) << " model: the measured times around it rms "
    << yaml_fixed(100 * cal.fit.rms_relative_residual, 1) << "%, worst "
    << yaml_fixed(100 * std::abs(cal.fit.worst_relative_residual), 1) << "%";
  if (cal.other_model_max_error >= 0)
    y << "; the " << to_string(cal.model == NetworkModel::kFlow ? NetworkModel::kAlphaBeta : NetworkModel::kFlow)
      << " model with the same terms, worst " << yaml_fixed(100 * cal.other_model_max_error, 1) << "%";
  y << ".\n";
  for (const std::string& note : cal.notes) y << "# note: " << note << "\n";
  const std::size_t hop = static_cast<std::size_t>(cal.hop);
  y << "nccl:\n  hop_latency:\n    " << to_string(cal.hop) << ":\n";
  table_yaml(y, cal.tuning.hop_latency[hop], "      ",
             [](TimeNs t) { return yaml_fixed(static_cast<double>(t) / 1e3, 3) + " us"; });
  y << "  efficiency:\n";
  table_yaml(y, cal.tuning.efficiency, "    ", [](double e) { return yaml_fixed(e, 6); });
  y << "all_reduce:\n  ranks: " << ranks << "\n  nodes: " << cal.nodes << "\n  source: " << yaml_quoted(source)
    << "\n  bytes: [";
  for (std::size_t i = 0; i < points.size(); ++i) y << (i ? ", " : "") << points[i].bytes;
  y << "]\n  time_us: [";
  for (std::size_t i = 0; i < points.size(); ++i) y << (i ? ", " : "") << yaml_fixed(points[i].time_ns / 1e3, 3);
  y << "]\n";
  return y.str();
}

}  // namespace moesim
