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
// runs at the speed of its slowest member: the factor is the minimum over its ranks. A GEMM
// beside communication reads the node's GEMM-size table instead of the cell where it has one
// (gemm_interference_factor).
//
// Header-only, beside the engine's Concurrency that it reads, so that both sim/cost (local tasks)
// and sim/net (collectives), which both link the engine, apply the same rule.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

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

// The column of the table a task on `stream` of `rank` reads, given what is busy there (task
// included): a foreign class's column, kInterferenceAllColumn, the own class's column, or -1
// when nothing else is busy (speed 1).
inline int interference_column(StreamClass stream, int rank, const Concurrency& concurrency) {
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
  if (num_foreign >= 2) return kInterferenceAllColumn;
  if (num_foreign == 1) return foreign;
  if (busy[own]) return own;
  return -1;
}

// Speed factor of a task on stream `stream` of `rank`, given what is busy there (task included).
inline double interference_factor(const InterferenceTable& table, StreamClass stream, int rank,
                                  const Concurrency& concurrency) {
  const int column = interference_column(stream, rank, concurrency);
  if (column < 0) return 1.0;
  return table.factors[static_cast<std::size_t>(interference_class(stream))][static_cast<std::size_t>(column)];
}

// A GEMM beside communication by its size (the node's gemm_with_communication table). Hopper's
// cuBLAS kernels are persistent, one CTA per SM, which a communication CTA cannot share; measured
// (validate/results/h200-2026-11-28), a GEMM of one or two tiles per SM keeps about half its
// speed beside a few held SMs, one of many loses little more than the SMs held, as if a displaced
// CTA ran its share after the others. Interpolated linearly in log(outputs_per_sm), flat beyond
// the table's ends.
inline double gemm_with_communication(const std::vector<GemmInterferencePoint>& points, double outputs_per_sm) {
  if (outputs_per_sm <= points.front().outputs_per_sm) return points.front().factor;
  if (outputs_per_sm >= points.back().outputs_per_sm) return points.back().factor;
  auto hi = std::upper_bound(points.begin(), points.end(), outputs_per_sm,
                             [](double x, const GemmInterferencePoint& p) { return x < p.outputs_per_sm; });
  auto lo = hi - 1;
  const double t = std::log(outputs_per_sm / lo->outputs_per_sm) / std::log(hi->outputs_per_sm / lo->outputs_per_sm);
  return lo->factor + t * (hi->factor - lo->factor);
}

// The factor of a GEMM kernel on a compute stream writing `outputs_per_sm` output elements per
// SM: as interference_factor, but beside communication the node's GEMM-size table, when it has
// one, replaces computation.with_communication, and with every other class busy (with_all) that
// value is scaled by with_all / with_communication (what the memory copies add).
inline double gemm_interference_factor(const InterferenceTable& table, StreamClass stream, int rank,
                                       const Concurrency& concurrency, double outputs_per_sm) {
  const int column = interference_column(stream, rank, concurrency);
  if (column < 0) return 1.0;
  const auto& row = table.factors[static_cast<std::size_t>(interference_class(stream))];
  const double cell = row[static_cast<std::size_t>(column)];
  constexpr int kComm = static_cast<int>(InterferenceClass::kCommunication);
  if (table.gemm_with_communication.empty() || interference_class(stream) != InterferenceClass::kComputation ||
      (column != kComm && column != kInterferenceAllColumn))
    return cell;
  const double by_size = gemm_with_communication(table.gemm_with_communication, outputs_per_sm);
  if (column == kComm) return by_size;
  // A node whose with_all cell is above its with_communication one must not speed a GEMM up.
  return std::min(1.0, by_size * cell / row[static_cast<std::size_t>(kComm)]);
}

// The factor of a task spanning `ranks` (a collective): its slowest member's.
inline double interference_factor(const InterferenceTable& table, StreamClass stream,
                                  std::span<const int> ranks, const Concurrency& concurrency) {
  double factor = 1.0;
  for (int r : ranks) factor = std::min(factor, interference_factor(table, stream, r, concurrency));
  return factor;
}

}  // namespace moesim
