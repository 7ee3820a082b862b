#include "sim/search/strategy_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/error.h"

namespace moesim::search {
namespace {

void check_positive(double value, const char* name) {
  if (!std::isfinite(value) || value <= 0.0) {
    throw InputError(std::string("strategy model: ") + name + " must be finite and > 0, got " +
                     std::to_string(value));
  }
}

void check_size(std::int64_t value, const char* name) {
  if (value < 1) {
    throw InputError(std::string("strategy model: ") + name + " must be >= 1, got " +
                     std::to_string(value));
  }
}

bool uses_all_factors(ReuseStrategy strategy) {
  return strategy == ReuseStrategy::kS1 || strategy == ReuseStrategy::kS2 ||
         strategy == ReuseStrategy::kS3;
}

}  // namespace

std::string_view strategy_name(ReuseStrategy strategy) {
  switch (strategy) {
    case ReuseStrategy::kNone:
      return "none";
    case ReuseStrategy::kS1:
      return "s1";
    case ReuseStrategy::kS2:
      return "s2";
    case ReuseStrategy::kS3:
      return "s3";
    case ReuseStrategy::kS4:
      return "s4";
  }
  return "?";
}

InterferenceFactors a100_interference_prior() {
  InterferenceFactors f;
  f.sigma_comp_with_comm = 0.96;
  f.mu_comm_with_comp = 0.72;
  f.sigma_all = 0.94;
  f.mu_all = 0.71;
  f.eta_all = 0.71;
  return f;
}

Throughputs hardware_throughputs(double flops_per_s, double a2a_bytes_per_s,
                                 double memcpy_bytes_per_s, double bytes_per_element) {
  check_positive(flops_per_s, "flops_per_s");
  check_positive(a2a_bytes_per_s, "a2a_bytes_per_s");
  check_positive(memcpy_bytes_per_s, "memcpy_bytes_per_s");
  check_positive(bytes_per_element, "bytes_per_element");
  return Throughputs{flops_per_s / 2.0, a2a_bytes_per_s / bytes_per_element,
                     memcpy_bytes_per_s / bytes_per_element};
}

void validate(const StrategyModelParams& params) {
  check_size(params.tokens_per_chunk, "tokens_per_chunk");
  check_size(params.model_dim, "model_dim");
  check_size(params.hidden_dim, "hidden_dim");
  check_positive(params.w_comp, "w_comp");
  check_positive(params.w_comm, "w_comm");
  check_positive(params.w_mem, "w_mem");
  check_positive(params.factors.sigma_comp_with_comm, "sigma_comp_with_comm");
  check_positive(params.factors.mu_comm_with_comp, "mu_comm_with_comp");
  check_positive(params.factors.sigma_all, "sigma_all");
  check_positive(params.factors.mu_all, "mu_all");
  check_positive(params.factors.eta_all, "eta_all");
}

double direction_cost_s(const StrategyModelParams& params, ReuseStrategy strategy,
                        const StrategyQ& q) {
  validate(params);
  if (q.gemms < 0 || q.all_to_alls < 0 || q.memcpy_units < 0) {
    throw InputError("strategy model: Q entries must be >= 0");
  }
  const double b = static_cast<double>(params.tokens_per_chunk);
  const double m = static_cast<double>(params.model_dim);
  const double h = static_cast<double>(params.hidden_dim);
  const double v_comp = b * h * m;
  const double v_comm = b * m;
  const double v_mem = b * m;
  const bool all = uses_all_factors(strategy);
  const double sigma = all ? params.factors.sigma_all : params.factors.sigma_comp_with_comm;
  const double mu = all ? params.factors.mu_all : params.factors.mu_comm_with_comp;
  const double eta = params.factors.eta_all;  // only S1-S3 have q3 > 0 in the table
  const auto term = [](int count, double volume, double factor, double throughput) {
    return count == 0 ? 0.0 : count * volume / (factor * throughput);
  };
  return std::max({term(q.gemms, v_comp, sigma, params.w_comp),
                   term(q.all_to_alls, v_comm, mu, params.w_comm),
                   term(q.memcpy_units, v_mem, eta, params.w_mem)});
}

StrategyCosts strategy_costs(const StrategyModelParams& params) {
  validate(params);
  StrategyCosts costs;
  for (std::size_t i = 0; i < kStrategyTable.size(); ++i) {
    const StrategyRow& row = kStrategyTable[i];
    costs.forward_s[i] = direction_cost_s(params, row.strategy, row.forward);
    costs.backward_s[i] = direction_cost_s(params, row.strategy, row.backward);
    costs.total_s[i] = costs.forward_s[i] + costs.backward_s[i];
  }
  // Strict < scans in table order, so ties go to the earlier strategy.
  std::size_t best = 0;
  std::size_t best_reuse = 1;
  for (std::size_t i = 1; i < kStrategyTable.size(); ++i) {
    if (costs.total_s[i] < costs.total_s[best]) best = i;
    if (costs.total_s[i] < costs.total_s[best_reuse]) best_reuse = i;
  }
  costs.best = kStrategyTable[best].strategy;
  costs.best_reuse = kStrategyTable[best_reuse].strategy;
  return costs;
}

}  // namespace moesim::search
