#include "validate/published_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/cost/compute_cost.h"
#include "sim/driver/nccl_tests_replay.h"
#include "sim/driver/network_calibration.h"
#include "sim/driver/simulation.h"
#include "sim/graph/task_graph.h"
#include "sim/spec/loader.h"
#include "sim/spec/nccl_tests_log.h"
#include "sim/spec/presets.h"

namespace moesim::validate {

namespace {

// The tables are a few hundred kilobytes; the cap keeps a wrong path from being read without end.
constexpr std::uintmax_t kMaxTableBytes = std::uintmax_t{16} << 20;

ClusterSpec load_dataset_hardware(const DatasetSource& s) {
  return load_hardware_spec(resolve_hardware_arg(s.hardware, (s.dir / kSourceFile).string() + ": hardware"));
}

// nccl-tests' busbw in GB/s (bytes per ns) of a size and time.
double busbw(CollectiveOp op, int ranks, std::int64_t size_bytes, double time_us) {
  return static_cast<double>(size_bytes) / (time_us * 1e3) * nccl_tests_bus_factor(op, ranks);
}

CollectiveOp op_of_log(const NcclTestsLog& log, const DatasetSource& s) {
  const SourceLocation file{log.file, 0, 0};
  if (log.test.empty()) {
    if (!s.collective) throw InputError(file, "the log does not name its collective: give `collective:` in source.yaml");
    return *s.collective;
  }
  const auto logged = collective_of_nccl_test(log.test);
  if (!logged) throw InputError(file, "this is a log of " + log.test + ", a collective moesim does not model");
  if (s.collective && *s.collective != *logged)
    throw InputError(file, "this is a log of " + log.test + ", and source.yaml's collective says " +
                               std::string(to_string(*s.collective)));
  return *logged;
}

void replay_nccl_tests(DatasetReport& r, NetworkChoice choice) {
  const DatasetSource& s = r.source;
  const NcclTestsLog log = parse_nccl_tests_log((s.dir / s.file).string());
  const SourceLocation file{log.file, 0, 0};
  if (log.rows.empty()) throw InputError(file, "no nccl-tests result rows (size, count, type, redop, root, time, ...)");
  if (log.cpu_times) throw InputError(file, "the times are CPU times (nccl-tests -C 1), not the GPU's");
  if (log.ranks == 0) throw InputError(file, "the log lists no ranks ('#  Rank' lines): where it ran is unknown");
  const CollectiveOp op = op_of_log(log, s);
  const ClusterSpec cluster = load_dataset_hardware(s);
  r.hardware_name = cluster.name;
  r.model = std::string(to_string(resolve_network_model(cluster, choice.model))) + " network model";
  const LoggedGpus placed = gpus_of_log(log, cluster, log.ranks);
  r.notes = placed.notes;
  std::vector<int> group = placed.gpus;
  std::sort(group.begin(), group.end());
  const int n = static_cast<int>(group.size());
  const TaskGraph graph(cluster.num_gpus(), group);
  const auto model = make_collective_model(graph, cluster, choice);
  for (const NcclTestsRow& row : log.rows) {
    if (op == CollectiveOp::kAllToAll && row.size_bytes % n != 0)
      throw InputError(SourceLocation{log.file, row.line, 1},
                       "the size " + std::to_string(row.size_bytes) + " does not split evenly over " + std::to_string(n) + " ranks");
    CollectiveComparison c;
    c.op = op;
    c.ranks = n;
    c.nodes = nodes_holding(cluster, group);
    c.size_bytes = row.size_bytes;
    c.measured_us = row.time_us;
    c.simulated_us = static_cast<double>(simulate_nccl_tests_row(*model, op, row.size_bytes, group)) / 1e3;
    c.measured_busbw = busbw(op, n, c.size_bytes, c.measured_us);
    c.simulated_busbw = busbw(op, n, c.size_bytes, c.simulated_us);
    c.line = row.line;
    r.collectives.push_back(c);
  }
}

void replay_xla_collectives(DatasetReport& r, NetworkChoice choice) {
  const DatasetSource& s = r.source;
  const std::string path = (s.dir / s.file).string();
  const auto points = parse_xla_collectives(read_input_file(path, kMaxTableBytes, "XLA collective table"), path);
  const ClusterSpec cluster = load_dataset_hardware(s);
  r.hardware_name = cluster.name;
  r.model = std::string(to_string(resolve_network_model(cluster, choice.model))) + " network model";
  // One model per group size, each over GPUs 0..n-1 of node 0, as the table's first group ran.
  std::map<int, std::pair<std::unique_ptr<TaskGraph>, std::unique_ptr<CollectiveModel>>> models;
  for (const MeasuredCollective& p : points) {
    if (p.ranks > cluster.node.gpus_per_node)
      throw InputError(SourceLocation{path, p.line, 1}, std::to_string(p.ranks) + " devices per group; " + cluster.name +
                                                            " has " + std::to_string(cluster.node.gpus_per_node) + " per node");
    auto& slot = models[p.ranks];
    if (!slot.second) {
      slot.first = std::make_unique<TaskGraph>(cluster.num_gpus(), first_gpus(p.ranks));
      slot.second = make_collective_model(*slot.first, cluster, choice);
    }
    CollectiveComparison c;
    c.op = p.op;
    c.ranks = p.ranks;
    c.size_bytes = p.size_bytes;
    c.measured_us = p.time_us;
    c.simulated_us = static_cast<double>(simulate_nccl_tests_row(*slot.second, p.op, p.size_bytes, first_gpus(p.ranks))) / 1e3;
    c.measured_busbw = busbw(p.op, p.ranks, c.size_bytes, c.measured_us);
    c.simulated_busbw = busbw(p.op, p.ranks, c.size_bytes, c.simulated_us);
    c.line = p.line;
    r.collectives.push_back(c);
  }
}

void replay_xla_matmul(DatasetReport& r) {
  const DatasetSource& s = r.source;
  const std::string path = (s.dir / s.file).string();
  const auto points = parse_xla_matmul(read_input_file(path, kMaxTableBytes, "XLA matmul table"), path, s.dtypes);
  const ClusterSpec cluster = load_dataset_hardware(s);
  r.hardware_name = cluster.name;
  const bool calibrated = cluster.node.gpu.calibration && !cluster.node.gpu.calibration->gemm.empty();
  r.model = calibrated ? "compute model: calibrated GEMM tables" : "compute model: GEMM tiles in waves over the SMs";
  const ComputeCostModel cost(cluster);
  for (const MeasuredGemm& g : points) {
    const int element_bytes = (g.dtype == DType::kBf16 || g.dtype == DType::kFp16) ? 2 : 4;
    r.gemms.push_back(GemmComparison{g, cost.gemm_flop_rate(GemmWork{g.b, g.m, g.n, g.k, g.dtype, element_bytes})});
  }
}

}  // namespace

ErrorStats error_stats(const std::vector<double>& errors) {
  ErrorStats st;
  st.count = errors.size();
  std::vector<double> abs;
  for (const double e : errors) {
    abs.push_back(std::abs(e));
    if (std::abs(e) > std::abs(st.worst)) st.worst = e;
  }
  st.median_abs = median(abs);
  return st;
}

DatasetReport replay_dataset(const DatasetSource& source, NetworkModel network) {
  DatasetReport r;
  r.source = source;
  const NetworkChoice choice{network, AllToAllAlgorithm::kPairwise};
  switch (source.kind) {
    case DatasetKind::kNcclTests: replay_nccl_tests(r, choice); break;
    case DatasetKind::kXlaCollectives: replay_xla_collectives(r, choice); break;
    case DatasetKind::kXlaMatmul:
    case DatasetKind::kGemmTable: replay_xla_matmul(r); break;
  }
  return r;
}

}  // namespace moesim::validate
