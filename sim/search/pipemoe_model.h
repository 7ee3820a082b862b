// PipeMoE (INFOCOM'23) linear alpha-beta model of one pipelined MoE layer, and the exact integer
// pipelining degree that minimises it.
//
// Model (reference moe-systems.md section 4): an all-to-all of x bytes costs a_a + b_a*x, the
// expert work of n units (FLOPs, or the m*n*k*4 GEMM measure) costs a_e + b_e*n. Given the
// per-layer totals n_d (all-to-all bytes) and n_e (expert work), one chunk at degree r costs
//   a_r = a_a + b_a*n_d/r   (one all-to-all of the chunk)   e_r = a_e + b_e*n_e/r   (its experts)
// and the layer time is
//   T(1) = T1 = 2*t_d + t_e = 2*(a_a + b_a*n_d) + a_e + b_e*n_e            (no pipelining)
//   T(r) = max(2*a_r + r*e_r, 2*r*a_r)                                       (r >= 2)
// The two arguments of the max are the paper's overall regimes:
//   T3(r) = 2*a_r + r*e_r = 2*a_a + b_e*n_e + 2*b_a*n_d/r + a_e*r   compute-dominated overall
//   T4(r) = 2*r*a_r       = 2*r*a_a + 2*b_a*n_d                     comm-dominated overall
// and T2 (comm-dominated per chunk, e_r <= a_r) has the same value as T4: when one chunk's
// experts finish before the next chunk's all-to-all, the comm stream never waits. The
// unconstrained minimiser of T3 is r* = sqrt(2*b_a*n_d / a_e) (derived; reported, not used).
//
// optimal_degree() evaluates T(r) at every integer r in [1, r_max] and keeps the smallest r with
// the lowest time. Exhaustive evaluation is deliberate: r_max is small (<= 64 in practice), the
// result is exact and deterministic, and the published solver (SciPy SLSQP over a continuous r)
// fails silently and can return a degree of 0 or below.
//
// All times are seconds (double); this model ranks degrees, the simulator proper keeps integer ns.
#pragma once

#include <string_view>
#include <vector>

namespace moesim::search {

// Linear cost constants plus the layer's totals. Every field must be finite and >= 0.
struct PipeMoeParams {
  double a2a_alpha_s = 0.0;             // a_a: fixed cost of one all-to-all
  double a2a_beta_s_per_byte = 0.0;     // b_a
  double expert_alpha_s = 0.0;          // a_e: fixed cost of one chunk's expert computation
  double expert_beta_s_per_unit = 0.0;  // b_e: per unit of expert work (the unit of n_e)
  double dispatch_bytes = 0.0;          // n_d: bytes of one all-to-all over the whole layer
  double expert_work = 0.0;             // n_e: expert work of the whole layer
};

enum class PipeMoeRegime {
  kT1NoPipeline,      // r = 1
  kT2CommPerChunk,    // r >= 2, e_r <= a_r: T = 2*r*a_r
  kT3ComputeOverall,  // r >= 2, e_r > a_r, T3(r) >= T4(r): T = T3(r)
  kT4CommOverall,     // r >= 2, e_r > a_r, T4(r) > T3(r): T = T4(r)
};

// "T1" .. "T4".
std::string_view regime_name(PipeMoeRegime regime);

// Throws InputError naming the first field that is negative or not finite.
void validate(const PipeMoeParams& params);

// Per-chunk costs at degree r (r >= 1, else InputError).
double chunk_a2a_time_s(const PipeMoeParams& params, int degree);     // a_r
double chunk_expert_time_s(const PipeMoeParams& params, int degree);  // e_r

// The regime formulas, each evaluated as written above regardless of whether it is the active one.
double t1_time_s(const PipeMoeParams& params);
double t2_time_s(const PipeMoeParams& params, int degree);  // 2*r*a_r (equal to T4)
double t3_time_s(const PipeMoeParams& params, int degree);
double t4_time_s(const PipeMoeParams& params, int degree);

// T(r): T1 for r = 1, max(T3, T4) for r >= 2.
double pipelined_time_s(const PipeMoeParams& params, int degree);

// Which regime sets T(r). On T3 == T4 with e_r > a_r the regime is T3 (compute-bound wins ties).
PipeMoeRegime regime_at(const PipeMoeParams& params, int degree);

// r* = sqrt(2*b_a*n_d / a_e). With a_e == 0 it is +infinity when b_a*n_d > 0 (T3 keeps falling)
// and 0 when b_a*n_d == 0 as well (T3 is flat; the limit of the formula for a_e > 0 is 0).
double t3_unconstrained_minimiser(const PipeMoeParams& params);

struct PipeMoeChoice {
  int degree = 1;       // the exact integer minimiser (ties -> smaller r)
  double time_s = 0.0;  // T(degree)
  PipeMoeRegime regime = PipeMoeRegime::kT1NoPipeline;
  double t3_minimiser = 0.0;             // r*, for reporting
  std::vector<double> time_by_degree_s;  // T(r) for r = 1..r_max, index r-1
};

inline constexpr int kMaxPipelineDegree = 1 << 16;

// Minimise T(r) over the integers 1..r_max. InputError when r_max < 1 or r_max >
// kMaxPipelineDegree, or when params is invalid.
PipeMoeChoice optimal_degree(const PipeMoeParams& params, int r_max);

}  // namespace moesim::search
