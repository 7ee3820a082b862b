#include "sim/search/pipemoe_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/core/error.h"

namespace moesim::search {
namespace {

void check_field(double value, const char* name) {
  if (!std::isfinite(value) || value < 0.0) {
    throw InputError(std::string("PipeMoE model: ") + name + " must be finite and >= 0, got " +
                     std::to_string(value));
  }
}

void check_degree(int degree) {
  if (degree < 1) {
    throw InputError("PipeMoE model: pipelining degree r must be >= 1, got " +
                     std::to_string(degree));
  }
}

}  // namespace

std::string_view regime_name(PipeMoeRegime regime) {
  switch (regime) {
    case PipeMoeRegime::kT1NoPipeline:
      return "T1";
    case PipeMoeRegime::kT2CommPerChunk:
      return "T2";
    case PipeMoeRegime::kT3ComputeOverall:
      return "T3";
    case PipeMoeRegime::kT4CommOverall:
      return "T4";
  }
  return "?";
}

void validate(const PipeMoeParams& params) {
  check_field(params.a2a_alpha_s, "a2a_alpha_s");
  check_field(params.a2a_beta_s_per_byte, "a2a_beta_s_per_byte");
  check_field(params.expert_alpha_s, "expert_alpha_s");
  check_field(params.expert_beta_s_per_unit, "expert_beta_s_per_unit");
  check_field(params.dispatch_bytes, "dispatch_bytes");
  check_field(params.expert_work, "expert_work");
}

double chunk_a2a_time_s(const PipeMoeParams& params, int degree) {
  check_degree(degree);
  return params.a2a_alpha_s + params.a2a_beta_s_per_byte * params.dispatch_bytes / degree;
}

double chunk_expert_time_s(const PipeMoeParams& params, int degree) {
  check_degree(degree);
  return params.expert_alpha_s + params.expert_beta_s_per_unit * params.expert_work / degree;
}

double t1_time_s(const PipeMoeParams& params) {
  const double t_d = params.a2a_alpha_s + params.a2a_beta_s_per_byte * params.dispatch_bytes;
  const double t_e = params.expert_alpha_s + params.expert_beta_s_per_unit * params.expert_work;
  return 2.0 * t_d + t_e;
}

double t2_time_s(const PipeMoeParams& params, int degree) {
  return 2.0 * degree * chunk_a2a_time_s(params, degree);
}

double t3_time_s(const PipeMoeParams& params, int degree) {
  check_degree(degree);
  const double r = degree;
  return 2.0 * params.a2a_alpha_s + params.expert_beta_s_per_unit * params.expert_work +
         2.0 * params.a2a_beta_s_per_byte * params.dispatch_bytes / r + params.expert_alpha_s * r;
}

double t4_time_s(const PipeMoeParams& params, int degree) {
  check_degree(degree);
  return 2.0 * degree * params.a2a_alpha_s +
         2.0 * params.a2a_beta_s_per_byte * params.dispatch_bytes;
}

double pipelined_time_s(const PipeMoeParams& params, int degree) {
  check_degree(degree);
  if (degree == 1) return t1_time_s(params);
  const double a_r = chunk_a2a_time_s(params, degree);
  const double e_r = chunk_expert_time_s(params, degree);
  return std::max(2.0 * a_r + degree * e_r, 2.0 * degree * a_r);
}

PipeMoeRegime regime_at(const PipeMoeParams& params, int degree) {
  check_degree(degree);
  if (degree == 1) return PipeMoeRegime::kT1NoPipeline;
  const double a_r = chunk_a2a_time_s(params, degree);
  const double e_r = chunk_expert_time_s(params, degree);
  if (e_r <= a_r) return PipeMoeRegime::kT2CommPerChunk;
  return 2.0 * a_r + degree * e_r >= 2.0 * degree * a_r ? PipeMoeRegime::kT3ComputeOverall
                                                        : PipeMoeRegime::kT4CommOverall;
}

double t3_unconstrained_minimiser(const PipeMoeParams& params) {
  const double numerator = 2.0 * params.a2a_beta_s_per_byte * params.dispatch_bytes;
  if (params.expert_alpha_s == 0.0) {
    return numerator > 0.0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
  return std::sqrt(numerator / params.expert_alpha_s);
}

PipeMoeChoice optimal_degree(const PipeMoeParams& params, int r_max) {
  validate(params);
  if (r_max < 1 || r_max > kMaxPipelineDegree) {
    throw InputError("PipeMoE model: r_max must be in [1, " + std::to_string(kMaxPipelineDegree) +
                     "], got " + std::to_string(r_max));
  }
  PipeMoeChoice choice;
  choice.time_by_degree_s.reserve(static_cast<std::size_t>(r_max));
  for (int r = 1; r <= r_max; ++r) {
    const double t = pipelined_time_s(params, r);
    choice.time_by_degree_s.push_back(t);
    // Strict < keeps the smaller degree on ties: fewer chunks means fewer launches for the
    // same modelled time.
    if (r == 1 || t < choice.time_s) {
      choice.degree = r;
      choice.time_s = t;
    }
  }
  choice.regime = regime_at(params, choice.degree);
  choice.t3_minimiser = t3_unconstrained_minimiser(params);
  return choice;
}

}  // namespace moesim::search
