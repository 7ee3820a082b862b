#include "sim/driver/footprint.h"

#include <unistd.h>

#include <cstdio>

#include "sim/core/checked_math.h"
#include "sim/core/error.h"

namespace moesim {
namespace {

std::string gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(std::int64_t{1} << 30));
  return buf;
}

}  // namespace

std::string Footprint::describe() const {
  std::string s = "about " + gib(total_bytes()) + " (";
  if (routing_bytes > 0) s += "routing " + gib(routing_bytes) + ": the N x E demand and N x N pair counts per chunk; ";
  return s + "graph " + gib(graph_bytes) + ": about " + std::to_string(graph.tasks) + " tasks on " +
         std::to_string(graph.simulated_ranks) + " simulated rank(s))";
}

Footprint estimate_footprint(const LayerDims& dims, const RunSpec& run, const BuildOptions& options) {
  Footprint f;
  const bool routed = !run.routing.balanced();
  f.graph = estimate_graph_size(dims, run, options, routed);
  f.graph_bytes = checked_mul(f.graph.tasks, kBytesPerTask);
  if (routed) {
    const std::int64_t n = dims.ep_size, e = dims.num_experts, chunks = dims.num_chunks;
    std::int64_t counts = checked_add(checked_mul(n, e), checked_mul(chunks, checked_mul(n, n)));
    if (run.routing.kind == RoutingKind::kMatrix) counts = checked_add(counts, checked_mul(n, e));
    f.routing_bytes = checked_mul(counts, std::int64_t{8});
  }
  return f;
}

std::int64_t default_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;  // unknown: no default limit
  return static_cast<std::int64_t>(pages) * page / 2;
}

void check_memory_limit(const Footprint& footprint, int concurrent, std::int64_t limit, const std::string& what) {
  if (limit <= 0) return;
  const std::int64_t need = checked_mul(footprint.total_bytes(), static_cast<std::int64_t>(concurrent));
  if (need <= limit) return;
  std::string message = what + " would need " + footprint.describe();
  if (concurrent > 1) message += " x " + std::to_string(concurrent) + " simulations at once (--jobs) = " + gib(need);
  throw InputError(message + ", more than --memory-limit " + gib(limit) +
                   " (default: half of this machine's memory); simulate fewer ranks (uniform routing simulates "
                   "one), chunks or layers" + (concurrent > 1 ? ", lower --jobs" : "") +
                   ", or raise --memory-limit (none: no limit)");
}

}  // namespace moesim
