#include "sim/step/moe_routing.h"

#include <string>

#include "sim/core/error.h"

namespace moesim {

namespace {

std::shared_ptr<const TrafficMatrix> traffic(const RoutingPlan& plan, int c, std::int64_t row_bytes) {
  auto m = std::make_shared<TrafficMatrix>();
  m->size = plan.shape().ranks;
  m->row_bytes = row_bytes;
  m->rows = plan.pair_matrix(c);  // shared with the plan, not copied
  return m;
}

}  // namespace

std::int64_t MoeRouting::total_received() const {
  std::int64_t total = 0;
  for (std::int64_t rows : received) total += rows;
  return total;
}

std::optional<MoeRouting> make_moe_routing(const RoutingSpec& spec, const MoeRoutingShape& shape,
                                           std::uint64_t seed) {
  if (spec.balanced()) return std::nullopt;
  RoutingShape rs;
  rs.ranks = shape.ep;
  rs.experts = shape.experts;
  rs.top_k = shape.top_k;
  rs.tokens = shape.tokens;
  // A token chooses an expert at most once, so B rows per pair keeps every choice.
  rs.capacity = shape.dropless ? shape.tokens : shape.capacity;
  rs.chunks = shape.chunks;
  std::optional<RoutingPlan> plan;
  try {
    plan.emplace(make_routing_plan(spec, rs, seed));
  } catch (const InputError& e) {
    throw InputError(e.where(), "--routing: " + e.rule() + " (the step's MoE layers: ep = " +
                                    std::to_string(shape.ep) + " ranks, " + std::to_string(shape.experts) +
                                    " experts, top_k = " + std::to_string(shape.top_k) + ")");
  }
  MoeRouting out;
  out.stats = plan->stats();
  out.rank = out.stats.busiest_rank;
  for (int c = 0; c < shape.chunks; ++c) {
    out.sent.push_back(plan->sent_rows(out.rank, c));
    out.received.push_back(plan->received_rows(out.rank, c));
    out.rows_traffic.push_back(traffic(*plan, c, shape.row_bytes));
    out.probs_traffic.push_back(traffic(*plan, c, shape.element_bytes));
  }
  return out;
}

}  // namespace moesim
