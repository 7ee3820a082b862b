// What simulating one step holds in memory at its peak, estimated from the layer's sizes before
// anything is allocated, so that a run too large for the machine stops at once with the estimate
// (exit 2) instead of swapping for minutes or ending in bad_alloc.
//
// Counted:
//   routing  with imbalanced routing, the routing plan's N x E demand and per-chunk N x N pair
//            counts (8 bytes each; the graph's traffic matrices share the pair counts), and a
//            matrix file's N x E popularities while it is read;
//   graph    the estimated tasks (estimate_graph_size, an upper estimate) at kBytesPerTask each:
//            the task with its edges and buffer lists, the engine's trace entry and memory events.
// Not counted: the flow model's per-pair flows of a collective that is not aggregated (pairwise
// all-to-allv, `collective_plan.h`), which live while that collective runs; the program itself
// (about 8 MB).
#pragma once

#include <cstdint>
#include <string>

#include "sim/build/moe_graph.h"
#include "sim/spec/run_spec.h"

namespace moesim {

// Measured with /usr/bin/time -f %M on `moesim simulate` after taking off the routing bytes:
// 0.84-0.90 KiB per task with zipf routing on 128, 512 and 1,024 simulated ranks (5k-42k tasks)
// and 1.0 KiB for a TED layout with gradient all-reduces (3.6k tasks).
inline constexpr std::int64_t kBytesPerTask = 1024;

struct Footprint {
  GraphSize graph;
  std::int64_t routing_bytes = 0;
  std::int64_t graph_bytes = 0;

  std::int64_t total_bytes() const { return routing_bytes + graph_bytes; }
  // "about 10.73 GiB (routing 8.59 GiB: N x E demand and n x N x N pair counts for 16384 ranks;
  // graph 2.14 GiB: about 2,097,152 tasks on 16384 simulated ranks)"
  std::string describe() const;
};

Footprint estimate_footprint(const LayerDims& dims, const RunSpec& run, const BuildOptions& options);

// Half of this machine's physical memory: the default of --memory-limit.
std::int64_t default_memory_limit();

// InputError when `concurrent` simulations of `footprint` each (a plan's or sweep's threads) need
// more than `limit` bytes (0: no limit). `what` names the run in the message ("the simulation",
// "configuration 12 of the sweep").
void check_memory_limit(const Footprint& footprint, int concurrent, std::int64_t limit, const std::string& what);

}  // namespace moesim
