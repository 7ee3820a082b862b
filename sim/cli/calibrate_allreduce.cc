// `moesim calibrate --allreduce-log`: NCCL's ring and tree terms fitted to an nccl-tests
// all_reduce_perf log (sim/driver/all_reduce_calibration.h), written as a calibration file.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "sim/cli/calibrate_network.h"
#include "sim/core/error.h"
#include "sim/driver/all_reduce_calibration.h"
#include "sim/driver/logged_gpus.h"
#include "sim/spec/loader.h"
#include "sim/spec/yaml_text.h"

namespace moesim::cli {
namespace {

struct MeasuredAllReduce {
  std::vector<int> gpus;
  std::vector<AllReducePoint> points;
  std::string file;
  std::vector<std::string> notes;
  int ranks() const { return static_cast<int>(gpus.size()); }
};

// An all-reduce's terms depend on how many ranks on how many nodes ran it: a log of other GPUs,
// or of a part of --hardware, is refused unless --force (then a note). Checked before the ranks are
// placed on the cluster's GPUs, so that a log of more nodes than it has hears this rule too.
void check_logged_ranks(const NcclTestsLog& log, const ClusterSpec& cluster, int ranks_if_unlisted, bool force,
                        std::vector<std::string>& notes) {
  const LoggedShape shape = shape_of_log(log, ranks_if_unlisted);
  const int ranks = shape.ranks;
  const int nodes = std::max(1, shape.hosts);
  if (ranks == cluster.num_gpus() && nodes == cluster.num_nodes) return;
  const std::string what =
      "the all-reduce ran on " + std::to_string(ranks) + " ranks on " + std::to_string(nodes) + " host" +
      (nodes == 1 ? "" : "s") + " and '" + cluster.name + "' (" + cluster.origin.to_string() + ") has " +
      std::to_string(cluster.num_gpus()) + " GPUs on " + std::to_string(cluster.num_nodes) + " node" +
      (cluster.num_nodes == 1 ? "" : "s");
  if (force) {
    notes.push_back(what + "; fitted anyway (--force): its terms are those of the logged GPUs");
    return;
  }
  throw InputError(SourceLocation{log.file, shape.line, shape.line ? 1 : 0},
                   what + ": NCCL's all-reduce terms depend on both; give --hardware a preset of the GPUs it ran on "
                          "(--ranks for a log without '#  Rank' lines), or --force to fit it anyway");
}

MeasuredAllReduce read_allreduce_log(const CalibrateArgs& a, const ClusterSpec& cluster) {
  const NcclTestsLog log = parse_nccl_tests_log(a.allreduce_log);
  const SourceLocation file{log.file, 0, 0};
  MeasuredAllReduce m;
  m.file = log.file;
  if (log.rows.empty()) throw InputError(file, "no nccl-tests result rows (size, count, type, redop, root, time, ...)");
  if (!log.test.empty() && log.test != "all_reduce_perf")
    throw InputError(file, "this is a log of " + log.test + ", not of all_reduce_perf");
  if (log.cpu_times)
    throw InputError(file, "the times are CPU times (nccl-tests -C 1), not the GPU's; rerun all_reduce_perf without -C");
  if (a.ranks != 0 && log.ranks != 0 && log.ranks != a.ranks)
    throw InputError(file, "the log lists " + std::to_string(log.ranks) + " ranks, --ranks says " + std::to_string(a.ranks));
  if (cluster.node.loopback || cluster.num_gpus() < 2)
    throw InputError(cluster.origin, "'" + cluster.name + "' has no network between GPUs (one GPU, or a loopback "
                                     "node): there is no all-reduce to calibrate");
  check_logged_gpu(log, cluster.node.gpu.name, a.force, m.notes);
  if (log.placement.empty() && a.ranks == 0)
    throw InputError(file, "the log has no '#  Rank' lines to count its GPUs; give --ranks");
  check_logged_ranks(log, cluster, a.ranks, a.force, m.notes);
  LoggedGpus placed = gpus_of_log(log, cluster, a.ranks);
  m.gpus = std::move(placed.gpus);
  m.notes.insert(m.notes.end(), placed.notes.begin(), placed.notes.end());
  if (m.ranks() < 2) throw InputError(file, "the all-reduce ran on one rank: it crossed no network");
  for (const NcclTestsRow& row : log.rows) {
    if (row.redop == "none" || row.redop.empty())
      throw InputError(SourceLocation{log.file, row.line, 1},
                       "redop '" + row.redop + "': this is not an all-reduce log (all_reduce_perf writes its "
                       "reduction, e.g. 'sum')");
    m.points.push_back(AllReducePoint{row.size_bytes, row.time_us * 1e3});
  }
  return m;
}

std::string parameter_text(const FittedParameter& f) {
  if (std::isinf(f.standard_error)) return yaml_fixed(f.value, 4) + " (not determined by the log)";
  return yaml_fixed(f.value, 4) + " +- " + yaml_fixed(f.standard_error, 4) + (f.at_bound ? " (at its bound)" : "");
}

// One line per (algorithm, protocol) table: "ring ll 0.90, ll128 2.85, simple 5.10; tree ...".
template <typename T, typename Show>
std::string table_text(const PerNcclAlgorithm<T>& table, Show show) {
  std::string out;
  for (NcclAlgorithm alg : {NcclAlgorithm::kRing, NcclAlgorithm::kTree}) {
    out += std::string(alg == NcclAlgorithm::kRing ? "" : "; ") + to_string(alg);
    for (NcclProtocol q : {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple})
      out += std::string(q == NcclProtocol::kLL ? " " : ", ") + to_string(q) + " " +
             show(table[static_cast<std::size_t>(alg)][static_cast<std::size_t>(q)]);
  }
  return out;
}

void print_allreduce_fit(const CalibrateArgs& a, const MeasuredAllReduce& m, const AllReduceCalibration& cal,
                         bool links_calibrated) {
  const std::size_t hop = static_cast<std::size_t>(cal.hop);
  std::cout << "wrote " << a.out_path << ": all-reduce of " << m.ranks() << " GPUs on " << cal.nodes << " node"
            << (cal.nodes == 1 ? "" : "s") << ", " << m.points.size() << " sizes, fitted on the "
            << to_string(cal.model) << " model (standard errors after +-)\n"
            << "  " << to_string(cal.hop) << " hop latencies x " << parameter_text(cal.hop_factor) << ": "
            << table_text(cal.tuning.hop_latency[hop],
                          [](TimeNs t) { return yaml_fixed(static_cast<double>(t) / 1e3, 2); })
            << " us\n  efficiencies x " << parameter_text(cal.efficiency_factor) << ": "
            << table_text(cal.tuning.efficiency, [](double e) { return yaml_fixed(e, 3); }) << "\n"
            << "  kept: NCCL's base latencies, its other hop rows and channels, the links (" 
            << (links_calibrated ? "--base's" : "--hardware's") << ")\n";
  std::cout << "fit: the measured times around the fitted model: rms " << yaml_fixed(100 * cal.fit.rms_relative_residual, 1)
            << "%, worst " << yaml_fixed(100 * cal.fit.worst_relative_residual, 1) << "%";
  if (cal.other_model_max_error >= 0)
    std::cout << "; the " << to_string(cal.model == NetworkModel::kFlow ? NetworkModel::kAlphaBeta : NetworkModel::kFlow)
              << " model with these terms within " << yaml_fixed(100 * cal.other_model_max_error, 1) << "%";
  std::cout << "\n         size   measured(us)     fitted(us)  residual  runs as\n";
  for (std::size_t i = 0; i < m.points.size(); ++i) {
    char row[160];
    std::snprintf(row, sizeof row, "%13lld %14.2f %14.2f %+8.1f%%  %s/%s\n", static_cast<long long>(m.points[i].bytes),
                  m.points[i].time_ns / 1e3, cal.fit.model[i] / 1e3, 100 * cal.fit.relative_residual[i],
                  to_string(cal.runs[i].algorithm), to_string(cal.runs[i].protocol));
    std::cout << row;
  }
  for (const std::string& note : cal.notes) std::cout << "note: " << note << "\n";
  std::cout << "use it: moesim simulate --hardware " << a.hardware_path << " --calibration " << a.out_path << " ...\n";
}

}  // namespace

int run_allreduce_calibration(const CalibrateArgs& a, const std::string& version) {
  const ClusterSpec preset = load_hardware_spec(a.hardware_path);
  const MeasuredAllReduce m = read_allreduce_log(a, preset);
  if (preset.node.gpu.calibration) {
    throw InputError(preset.node.origin, "node '" + preset.node.name + "' already has a calibration (" +
                                             preset.node.gpu.calibration->file +
                                             "), and a node takes one: give --hardware a preset without the "
                                             "calibration: key, and that file as --base");
  }
  ClusterSpec cluster = preset;  // the preset with --base applied: the links the terms are fitted on
  std::string text;
  bool links_calibrated = false;
  if (!a.base_path.empty()) {
    const CalibrationSpec base = load_calibration(a.base_path, "--base");
    if (base.calibrates_all_reduce())
      throw InputError(base.nccl ? base.nccl_where : base.origin,
                       "--base already holds an all-reduce fit, and a node has one set of NCCL terms: give a "
                       "calibration without it");
    links_calibrated = base.calibrates_intra_node() || base.calibrates_inter_node();
    apply_calibration(cluster, base);
    text = whole_text(a.base_path);
  }
  AllReduceCalibration cal;
  try {
    cal = calibrate_all_reduce(cluster, m.gpus, m.points);
  } catch (const InputError& e) {  // the fit's rules are about the log: name it
    if (!e.where().file.empty()) throw;
    throw InputError(SourceLocation{m.file, 0, 0}, e.rule());
  }
  cal.notes.insert(cal.notes.begin(), m.notes.begin(), m.notes.end());
  const std::string source = "nccl-tests all_reduce_perf log " + a.allreduce_log;
  if (a.base_path.empty())
    text = network_calibration_header(cal.nodes > 1 ? cluster.name : cluster.node.name, cluster.node.gpu.name, source,
                                      version, a.command_line);
  text += all_reduce_calibration_yaml(cal, m.ranks(), m.points, source);
  write_checked_calibration(a.out_path, text, preset.node, m.file);
  print_allreduce_fit(a, m, cal, links_calibrated);
  return 0;
}

}  // namespace moesim::cli
