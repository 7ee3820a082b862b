#include "sim/cli/collective_command.h"

#include <cstdio>
#include <numeric>
#include <vector>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/spec/loader.h"

namespace moesim::cli {

std::int64_t parse_size_bytes(const std::string& text, const std::string& flag) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    throw InputError(flag + " '" + text + "' is not a size; use bytes or K, M, G (e.g. 1M)");
  }
  const std::string unit = text.substr(used);
  std::int64_t mult = 1;
  if (unit == "K" || unit == "k") {
    mult = std::int64_t{1} << 10;
  } else if (unit == "M" || unit == "m") {
    mult = std::int64_t{1} << 20;
  } else if (unit == "G" || unit == "g") {
    mult = std::int64_t{1} << 30;
  } else if (!unit.empty()) {
    throw InputError(flag + " '" + text + "' has an unknown unit '" + unit + "'; use K, M or G");
  }
  if (v <= 0 || v > (std::int64_t{1} << 50) / mult) throw InputError(flag + " '" + text + "' must be positive and at most 1 PiB");
  return v * mult;
}

int run_collective(const CollectiveArgs& a, std::ostream& out) {
  if (a.hardware_path.empty()) throw InputError("--hardware is required");
  const auto op = parse_collective_op(a.op);
  if (!op) throw InputError("--op '" + a.op + "' is not a collective; valid: all-to-all, all-reduce, all-gather, reduce-scatter");
  const auto network = parse_network_model(a.network);
  if (!network) throw InputError("--network '" + a.network + "' is not a network model; valid: auto, alpha-beta, flow");
  const auto a2a = parse_all_to_all_algorithm(a.a2a);
  if (!a2a) throw InputError("--a2a '" + a.a2a + "' is not an all-to-all algorithm; valid: pairwise, 2dh");
  if (a.step_factor < 2) throw InputError("--step-factor must be at least 2, got " + std::to_string(a.step_factor));
  const ClusterSpec cluster = load_hardware_spec(a.hardware_path, a.calibration_path);
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
  const NetworkChoice choice{*network, *a2a};
  const auto model = make_collective_model(graph, cluster, choice);
  const bool reduces = *op == CollectiveOp::kAllReduce || *op == CollectiveOp::kReduceScatter;
  const double bus = (*op == CollectiveOp::kAllReduce ? 2.0 : 1.0) * (n - 1) / n;

  char line[256];
  out << "# moesim collective: " << to_string(*op) << " on " << cluster.name << ", " << n << " ranks, "
      << to_string(resolve_network_model(cluster, *network)) << " network model";
  if (*op == CollectiveOp::kAllToAll) out << ", " << to_string(*a2a) << " algorithm";
  out << "\n# simulated: out-of-place columns only; busbw = algbw * " << (*op == CollectiveOp::kAllReduce ? "2(n-1)/n" : "(n-1)/n")
      << "\n";
  std::snprintf(line, sizeof line, "#%12s %12s %8s %6s %6s %10s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
                "time", "algbw", "busbw", "#wrong");
  out << line;
  std::snprintf(line, sizeof line, "#%12s %12s %8s %6s %6s %10s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
  out << line;
  const std::int64_t align = 4LL * n;
  for (std::int64_t size = min_bytes; size <= max_bytes; size *= a.step_factor) {
    const std::int64_t bytes = size / align * align;
    if (bytes == 0) continue;
    const TimeNs t = model->isolated_duration(CollectiveWork{*op, 0, bytes / n}, group);
    const double us = static_cast<double>(t) / 1e3;
    const double algbw = t > 0 ? static_cast<double>(bytes) / static_cast<double>(t) : 0.0;  // B/ns = GB/s
    std::snprintf(line, sizeof line, " %12lld %12lld %8s %6s %6d %10.2f %7.2f %7.2f %6s\n",
                  static_cast<long long>(bytes), static_cast<long long>(bytes / 4), "float", reduces ? "sum" : "none",
                  -1, us, algbw, algbw * bus, "N/A");
    out << line;
    if (size > max_bytes / a.step_factor) break;
  }
  return 0;
}

}  // namespace moesim::cli
