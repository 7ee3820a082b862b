#include "sim/driver/footprint.h"

#include <unistd.h>

#include <cstdio>

#include "sim/core/checked_math.h"
#include "sim/core/error.h"

namespace moesim {
namespace {

// In the largest binary unit that keeps a figure of at least 1 (GiB, MiB or KiB).
std::string size_text(std::int64_t bytes) {
  char buf[32];
  const auto b = static_cast<double>(bytes);
  if (bytes >= (std::int64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / static_cast<double>(std::int64_t{1} << 30));
  } else if (bytes >= (std::int64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / static_cast<double>(std::int64_t{1} << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024.0);
  }
  return buf;
}

}  // namespace

std::string Footprint::describe() const {
  std::string s = "about " + size_text(total_bytes()) + " (";
  if (routing_bytes > 0) s += "routing " + size_text(routing_bytes) + ": the N x E demand and N x N pair counts per chunk; ";
  return s + "graph " + size_text(graph_bytes) + ": about " + std::to_string(graph.tasks) + " tasks on " +
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
  if (concurrent > 1) message += " x " + std::to_string(concurrent) + " simulations at once (--jobs) = " + size_text(need);
  throw InputError(message + ", more than --memory-limit " + size_text(limit) +
                   " (default: half of this machine's memory); simulate fewer ranks (uniform routing simulates "
                   "one), chunks or layers" + (concurrent > 1 ? ", lower --jobs" : "") +
                   ", or raise --memory-limit (none: no limit)");
}

}  // namespace moesim
