// The training step's MoE layers under an imbalanced routing (`--routing zipf:<s>|matrix:<file>`
// with --global-batch): what the representative rank computes and what the all-to-alls move.
//
// Model. One routing plan (sim/routing/routing.h) over the expert-parallel group of ep ranks, made
// once per step: every MoE layer, microbatch and pipeline stage routes alike, as the MoE-layer
// simulation's layers do (zipf's hot experts placed by --seed, so a seed gives the same plan every
// run). Each member routes the B tokens it dispatches (MoeDims::tokens: the tensor-parallel
// group's N, or with own_shard its N / tp); the etp peers of such a layout and the other
// expert-parallel groups of the stage route as this one does.
//
// The dispatch and combine all-to-alls (and the routing probabilities' beside them) are
// all-to-allv over the plan's traffic matrix, the combine's transposed; a network model prices
// one as its slowest member makes it (sim/net). The all-to-all is synchronous: every member of
// the group waits for the combine until the most loaded rank has computed its rows, so the
// stage's representative rank computes the rows of the group's most loaded rank (the most rows
// received, RoutingStats::busiest_rank) and permutes the rows that rank sends. Its local experts'
// GEMMs run as the MoE-layer simulation runs them (sim/build/emitter.h, Emitter::expert_rows):
// batched over the E / ep local experts with the rank's received rows spread evenly over them,
// rounded up per expert (a grouped GEMM does the same FLOPs).
//
// Capacity: a model with a capacity_factor keeps min(demand, C) rows of each (source rank,
// expert) pair, C = floor(k f B / E), the MoE-layer simulation's rule; a dropless model (no
// capacity_factor, ModelSpec::dropless) keeps every routed row.
//
// Simplified, on purpose: the representative rank keeps its place (and so its collectives'
// placement) in the group while computing the busiest rank's rows; the activation memory of the
// step stays the balanced layout's (sim/memory/activations.h), not the busiest rank's; and the
// router's load-balancing loss, its auxiliary-free bias and batch-to-batch noise are not modelled
// (the counts are the plan's expectations).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sim/graph/task.h"
#include "sim/routing/routing.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/step_spec.h"

namespace moesim {

struct MoeRouting {
  RoutingStats stats;
  int rank = 0;                        // the expert-parallel position whose rows are simulated
  std::vector<std::int64_t> sent;      // its rows sent per chunk (its tokens' kept choices)
  std::vector<std::int64_t> received;  // its local experts' rows per chunk
  // Per chunk, the group's traffic of the tokens' rows (hidden x element bytes each) and of their
  // routing probabilities (one element each): shared by every task that moves those rows.
  std::vector<std::shared_ptr<const TrafficMatrix>> rows_traffic, probs_traffic;

  std::int64_t sent_in(int c) const { return sent.at(static_cast<std::size_t>(c)); }
  std::int64_t received_in(int c) const { return received.at(static_cast<std::size_t>(c)); }
  std::int64_t total_received() const;
};

// The sizes the plan needs from the step's MoE layer.
struct MoeRoutingShape {
  int ep = 1;
  int experts = 1;
  int top_k = 1;
  std::int64_t tokens = 0;    // B per member
  std::int64_t capacity = 0;  // C per (member, expert); ignored when dropless
  bool dropless = false;
  int chunks = 1;
  std::int64_t row_bytes = 0;  // hidden x element bytes
  int element_bytes = 2;
};

// nullopt for uniform routing. Throws InputError naming --routing and the rule when a matrix file
// does not fit the step (one row or ep rows of E columns).
std::optional<MoeRouting> make_moe_routing(const RoutingSpec& spec, const MoeRoutingShape& shape,
                                           std::uint64_t seed);

}  // namespace moesim
