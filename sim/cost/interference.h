// Interference between concurrent streams of one GPU (MPipeMoE, IPDPS'23, Fig. 3; reference 2.1).
//
// While stream classes overlap on a rank, each runs at a factor of its isolated speed, read from
// the node's InterferenceTable: row = the interference class of the task's stream (compute ->
// computation; comm.dispatch / comm.combine / comm.grad -> communication; copy.d2h / copy.h2d -> memcpy),
// column = what else is busy on the rank's OTHER streams:
//   - both foreign classes busy                      -> column "all" (3)
//   - exactly one foreign class busy                 -> that class's column
//   - only the same class, on another stream         -> the same-class column (e.g. dispatch and
//     (dispatch with combine, d2h with h2d)             combine both running: comm with comm)
//   - nothing else                                   -> 1.0
// The counts in the Concurrency include the task itself (one task per stream, streams are
// in-order), so the task's own stream is excluded. A collective spans several simulated ranks and
// runs at the speed of its slowest member: the factor is the minimum over its ranks.
//
// Header-only so that both sim/cost (local tasks) and sim/net (collectives) apply the same rule.
#pragma once

#include <algorithm>
#include <span>

#include "sim/engine/activity_model.h"
#include "sim/graph/task.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

inline constexpr int kInterferenceAllColumn = 3;

inline InterferenceClass interference_class(StreamClass s) {
  switch (s) {
    case StreamClass::kCompute:
      return InterferenceClass::kComputation;
    case StreamClass::kCommDispatch:
    case StreamClass::kCommCombine:
    case StreamClass::kCommGrad:
    case StreamClass::kCommPipeline:
      return InterferenceClass::kCommunication;
    case StreamClass::kCopyD2H:
    case StreamClass::kCopyH2D:
      return InterferenceClass::kMemcpy;
  }
  return InterferenceClass::kComputation;
}

// Speed factor of a task on stream `stream` of `rank`, given what is busy there (task included).
inline double interference_factor(const InterferenceTable& table, StreamClass stream, int rank,
                                  const Concurrency& concurrency) {
  const int own = static_cast<int>(interference_class(stream));
  bool busy[kNumInterferenceClasses] = {};
  for (int s = 0; s < kNumStreamClasses; ++s) {
    const auto other = static_cast<StreamClass>(s);
    if (other == stream || !concurrency.any_busy(rank, other)) continue;
    busy[static_cast<int>(interference_class(other))] = true;
  }
  int num_foreign = 0;
  int foreign = -1;
  for (int c = 0; c < kNumInterferenceClasses; ++c) {
    if (c != own && busy[c]) {
      ++num_foreign;
      foreign = c;
    }
  }
  const auto& row = table.factors[static_cast<std::size_t>(own)];
  if (num_foreign >= 2) return row[kInterferenceAllColumn];
  if (num_foreign == 1) return row[static_cast<std::size_t>(foreign)];
  if (busy[own]) return row[static_cast<std::size_t>(own)];
  return 1.0;
}

// The factor of a task spanning `ranks` (a collective): its slowest member's.
inline double interference_factor(const InterferenceTable& table, StreamClass stream,
                                  std::span<const int> ranks, const Concurrency& concurrency) {
  double factor = 1.0;
  for (int r : ranks) factor = std::min(factor, interference_factor(table, stream, r, concurrency));
  return factor;
}

}  // namespace moesim
