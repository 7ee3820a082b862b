#include "sim/cli/collective_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <set>
#include <vector>

#include "sim/cli/network_flag.h"
#include "sim/cli/number_flags.h"
#include "sim/core/error.h"
#include "sim/driver/network_calibration.h"
#include "sim/driver/nccl_tests_replay.h"
#include "sim/driver/simulation.h"
#include "sim/net/nccl_model.h"
#include "sim/spec/loader.h"
#include "sim/spec/nccl_tests_log.h"

namespace moesim::cli {

namespace {

bool reduces(CollectiveOp op) { return op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter; }

// The column of NCCL's choice, "algorithm/protocol" (nccl_model.h), for the collectives NCCL tunes:
// none for an all-to-all (per-peer send/recv), "-" where no network is crossed.
std::string nccl_column(const ClusterSpec& cluster, CollectiveOp op, std::int64_t bytes_per_peer,
                        const std::vector<int>& group) {
  if (op == CollectiveOp::kAllToAll) return "";
  std::string choice = "-";
  if (group.size() >= 2 && bytes_per_peer > 0 && !cluster.node.loopback) {
    const NcclRun run = nccl_choice(cluster, op, bytes_per_peer, group);
    choice = std::string(to_string(run.algorithm)) + "/" + to_string(run.protocol);
  }
  char cell[32];
  std::snprintf(cell, sizeof cell, " %12s", choice.c_str());
  return cell;
}

// --against: every row of the log, measured next to simulated.
int run_against_log(const CollectiveArgs& a, const ClusterSpec& cluster, CollectiveOp op_flag, NetworkChoice choice,
                    std::ostream& out) {
  const NcclTestsLog log = parse_nccl_tests_log(a.against_log);
  const SourceLocation file{log.file, 0, 0};
  if (log.rows.empty()) throw InputError(file, "no nccl-tests result rows (size, count, type, redop, root, time, ...)");
  if (log.cpu_times) throw InputError(file, "the times are CPU times (nccl-tests -C 1), not the GPU's");
  CollectiveOp op = op_flag;
  if (log.test.empty()) {
    // all_gather_perf and alltoall_perf both write redop 'none': the log must say which it is.
    if (!a.op_given)
      throw InputError(file, "the log does not name its collective (no 'Collective test starting' line); give --op");
  } else {
    const auto logged = collective_of_nccl_test(log.test);
    if (!logged) {
      throw InputError(file, "this is a log of " + log.test +
                                 "; moesim models alltoall_perf, all_reduce_perf, all_gather_perf and reduce_scatter_perf");
    }
    if (a.op_given && *logged != op_flag) {
      throw InputError(file, "this is a log of " + log.test + " (" + std::string(to_string(*logged)) + "), and --op says " +
                                 std::string(to_string(op_flag)));
    }
    op = *logged;
  }
  if (a.ranks != 0 && log.ranks != 0 && log.ranks != a.ranks)
    throw InputError(file, "the log lists " + std::to_string(log.ranks) + " ranks, --ranks says " + std::to_string(a.ranks));
  const LoggedGpus placed = gpus_of_log(log, cluster, a.ranks);
  std::vector<int> group = placed.gpus;
  std::sort(group.begin(), group.end());
  const int n = static_cast<int>(group.size());
  if (n < 2) throw InputError(file, "the log ran on one rank: there is no collective between GPUs to simulate");
  // Every row is checked and simulated before anything is printed: bad input leaves no half table.
  const TaskGraph graph(cluster.num_gpus(), group);
  const auto model = make_collective_model(graph, cluster, choice);
  std::vector<double> simulated_us;
  for (const NcclTestsRow& row : log.rows) {
    const SourceLocation at{log.file, row.line, 1};
    const bool row_reduces = !row.redop.empty() && row.redop != "none";
    if (!row.redop.empty() && row_reduces != reduces(op)) {
      throw InputError(at, "redop '" + row.redop + "' is not that of " + std::string(to_string(op)) + " (" +
                               (reduces(op) ? "a reduction" : "'none'") + "); give the --op the log measured");
    }
    if (op == CollectiveOp::kAllToAll && row.size_bytes % n != 0)
      throw InputError(at, "the size " + std::to_string(row.size_bytes) + " does not split evenly over " +
                               std::to_string(n) + " ranks");
    simulated_us.push_back(static_cast<double>(simulate_nccl_tests_row(*model, op, row.size_bytes, group)) / 1e3);
  }

  out << "# moesim collective against " << log.file << ": " << to_string(op) << " on " << cluster.name << ", " << n
      << " ranks on " << nodes_holding(cluster, group) << " node(s), "
      << to_string(resolve_network_model(cluster, choice.model)) << " network model";
  if (op == CollectiveOp::kAllToAll) out << ", " << to_string(choice.all_to_all) << " algorithm";
  out << "\n";
  for (const std::string& note : placed.notes) out << "# note: " << note << "\n";
  if (const auto mismatch = logged_gpu_mismatch(log, cluster.node.gpu.name))
    out << "# note: " << mismatch->what << ": the simulation is of the preset's GPU\n";
  char line[160];
  std::snprintf(line, sizeof line, "#%12s %12s %12s %8s\n#%12s %12s %12s %8s\n", "size", "measured", "simulated", "diff",
                "(B)", "(us)", "(us)", "(%)");
  out << line;
  double worst = 0, sum = 0;
  std::int64_t worst_size = 0;
  for (std::size_t i = 0; i < log.rows.size(); ++i) {
    const NcclTestsRow& row = log.rows[i];
    const double diff = (simulated_us[i] - row.time_us) / row.time_us;
    if (std::abs(diff) > std::abs(worst)) {
      worst = diff;
      worst_size = row.size_bytes;
    }
    sum += std::abs(diff);
    std::snprintf(line, sizeof line, " %12lld %12.2f %12.2f %+8.1f\n", static_cast<long long>(row.size_bytes),
                  row.time_us, simulated_us[i], 100 * diff);
    out << line;
  }
  std::snprintf(line, sizeof line, "# worst %+.1f%% at %lld B; mean |diff| %.1f%% over %zu rows\n", 100 * worst,
                static_cast<long long>(worst_size), 100 * sum / static_cast<double>(log.rows.size()), log.rows.size());
  out << line;
  return 0;
}

}  // namespace

int run_collective(const CollectiveArgs& a, std::ostream& out) {
  if (a.hardware_path.empty()) throw InputError("--hardware is required");
  const auto op = parse_collective_op(a.op);
  if (!op) throw InputError("--op '" + a.op + "' is not a collective; valid: all-to-all, all-reduce, all-gather, reduce-scatter");
  const NetworkModel network = parse_network_flag(a.network);
  const auto a2a = parse_all_to_all_algorithm(a.a2a);
  if (!a2a) throw InputError("--a2a '" + a.a2a + "' is not an all-to-all algorithm; valid: pairwise, 2dh");
  const ClusterSpec cluster = load_hardware_spec(a.hardware_path, a.calibration_path);
  if (a.against_given) {
    if (a.against_log.empty()) throw InputError("--against needs an nccl-tests log, got ''");
    return run_against_log(a, cluster, *op, NetworkChoice{network, *a2a}, out);
  }
  const int n = a.ranks == 0 ? cluster.num_gpus() : a.ranks;
  if (n < 1 || n > cluster.num_gpus())
    throw InputError("--ranks " + std::to_string(n) + " must be in [1, " + std::to_string(cluster.num_gpus()) +
                     "] (the GPUs of " + cluster.name + ")");
  const std::int64_t min_bytes = parse_size_bytes(a.min_bytes, "--min-bytes");
  const std::int64_t max_bytes = parse_size_bytes(a.max_bytes, "--max-bytes");
  if (min_bytes > max_bytes) throw InputError("--min-bytes must not exceed --max-bytes");

  std::vector<int> group(static_cast<std::size_t>(n));
  std::iota(group.begin(), group.end(), 0);
  const TaskGraph graph(n, {0});
  const NetworkChoice choice{network, *a2a};
  const auto model = make_collective_model(graph, cluster, choice);
  const double bus = nccl_tests_bus_factor(*op, n);

  char line[256];
  out << "# moesim collective: " << to_string(*op) << " on " << cluster.name << ", " << n << " ranks, "
      << to_string(resolve_network_model(cluster, network)) << " network model";
  if (*op == CollectiveOp::kAllToAll) out << ", " << to_string(*a2a) << " algorithm";
  out << "\n# simulated: out-of-place columns only; busbw = algbw * " << (*op == CollectiveOp::kAllReduce ? "2(n-1)/n" : "(n-1)/n")
      << "\n";
  const bool tuned = *op != CollectiveOp::kAllToAll;
  std::snprintf(line, sizeof line, "#%12s %12s %8s %6s %6s %10s %7s %7s %6s%s\n", "size", "count", "type", "redop", "root",
                "time", "algbw", "busbw", "#wrong", tuned ? "   nccl chose" : "");
  out << line;
  std::snprintf(line, sizeof line, "#%12s %12s %8s %6s %6s %10s %7s %7s %6s%s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", tuned ? " (algo/proto)" : "");
  out << line;
  const std::int64_t align = 4LL * n;
  for (std::int64_t size = min_bytes; size <= max_bytes; size *= a.step_factor) {
    const std::int64_t bytes = size / align * align;
    if (bytes == 0) continue;
    const TimeNs t = model->isolated_duration(CollectiveWork{*op, 0, bytes / n}, group);
    const double us = static_cast<double>(t) / 1e3;
    const double algbw = t > 0 ? static_cast<double>(bytes) / static_cast<double>(t) : 0.0;  // B/ns = GB/s
    std::snprintf(line, sizeof line, " %12lld %12lld %8s %6s %6d %10.2f %7.2f %7.2f %6s%s\n",
                  static_cast<long long>(bytes), static_cast<long long>(bytes / 4), "float", reduces(*op) ? "sum" : "none",
                  -1, us, algbw, algbw * bus, "N/A", nccl_column(cluster, *op, bytes / n, group).c_str());
    out << line;
    if (size > max_bytes / a.step_factor) break;
  }
  return 0;
}

}  // namespace moesim::cli
