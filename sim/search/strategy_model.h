// MPipeMoE (IPDPS'23) cost model for choosing how tensors overwritten by buffer reuse are restored
// for backward (Eq. 7-10, Table II; reference moe-systems.md section 3).
//
// Per pipeline chunk of b tokens (model dim M, expert hidden dim H):
//   v_comp = b*H*M   v_comm = b*M   v_mem = b*M                               (element counts)
// A strategy has a forward and a backward Q = [q1 GEMMs, q2 all-to-alls, q3 memcpy units] per chunk
// (one memcpy unit copies T_DI, b*M elements; T_M is 4 units when H = 4M) and costs
//   C = max(q1*v_comp/(sigma*W_comp), q2*v_comm/(mu*W_comm), q3*v_mem/(eta*W_mem))
// for each direction; the strategy's cost is C_forward + C_backward (seconds per chunk; the chunk
// count is the same for every strategy, so per-chunk costs rank them). A term with q = 0 is 0.
// Units: v_comp counts multiply-accumulates of one (b x M) x (M x H) GEMM, so W_comp is in MAC/s
// (FLOP/s / 2); v_comm and v_mem count elements, so W_comm and W_mem are in elements/s (bytes/s
// divided by the element size) -- hardware_throughputs() does these conversions.
// sigma, mu, eta are the interference factors (speed while other streams run / isolated speed,
// section 2.1): "none" and S4 never copy over PCIe, so their GEMMs run beside communication
// (sigma = computation-with-comm) and their all-to-alls beside computation (mu = comm-with-comp);
// S1-S3 run all three streams together and use the "all" factors (sigma_all, mu_all, eta_all).
//
// "none" keeps every tensor and its Q is component-wise no larger than any other row, so it always
// has the lowest cost; it wins unless memory forces reuse, which is why best_reuse (S1-S4 only)
// is reported beside best.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace moesim::search {

enum class ReuseStrategy { kNone = 0, kS1 = 1, kS2 = 2, kS3 = 3, kS4 = 4 };

inline constexpr int kNumReuseStrategies = 5;

// "none", "s1" .. "s4".
std::string_view strategy_name(ReuseStrategy strategy);

struct StrategyQ {
  int gemms = 0;         // q1
  int all_to_alls = 0;   // q2
  int memcpy_units = 0;  // q3

  friend bool operator==(const StrategyQ&, const StrategyQ&) = default;
};

struct StrategyRow {
  ReuseStrategy strategy;
  StrategyQ forward;
  StrategyQ backward;
};

// MPipeMoE Table II, in the tie-break order none, S1, S2, S3, S4.
inline constexpr std::array<StrategyRow, kNumReuseStrategies> kStrategyTable = {{
    {ReuseStrategy::kNone, {2, 2, 0}, {4, 2, 0}},  // keep T_DI and T_M
    {ReuseStrategy::kS1, {2, 2, 5}, {4, 2, 5}},    // offload T_DI and T_M
    {ReuseStrategy::kS2, {2, 2, 4}, {4, 3, 4}},    // re-dispatch T_DI, offload T_M
    {ReuseStrategy::kS3, {2, 2, 1}, {5, 2, 1}},    // offload T_DI, recompute T_M
    {ReuseStrategy::kS4, {2, 2, 0}, {5, 3, 0}},    // re-dispatch T_DI, recompute T_M
}};

// Interference factors; every one must be finite and > 0.
struct InterferenceFactors {
  double sigma_comp_with_comm = 1.0;  // computation while communication runs (none, S4)
  double mu_comm_with_comp = 1.0;     // communication while computation runs (none, S4)
  double sigma_all = 1.0;             // computation while comm and memcpy run (S1-S3)
  double mu_all = 1.0;                // communication while comp and memcpy run (S1-S3)
  double eta_all = 1.0;               // memcpy (PCIe) while comp and comm run (S1-S3)
};

// MPipeMoE Fig. 3 (A100 cluster): comp|comm 0.96, comm|comp 0.72, comp|all 0.94, comm|all 0.71,
// memcpy|all 0.71. A prior; a runtime should measure its own.
InterferenceFactors a100_interference_prior();

struct StrategyModelParams {
  std::int64_t tokens_per_chunk = 0;  // b
  std::int64_t model_dim = 0;         // M
  std::int64_t hidden_dim = 0;        // H
  double w_comp = 0.0;                // MAC/s
  double w_comm = 0.0;                // all-to-all elements/s
  double w_mem = 0.0;                 // PCIe memcpy elements/s
  InterferenceFactors factors;
};

struct Throughputs {
  double w_comp = 0.0;
  double w_comm = 0.0;
  double w_mem = 0.0;
};

// From FLOP/s and bytes/s to the model's units: W_comp = flops/2, W_comm and W_mem = bytes/s /
// bytes_per_element. All inputs finite and > 0, else InputError.
Throughputs hardware_throughputs(double flops_per_s, double a2a_bytes_per_s,
                                 double memcpy_bytes_per_s, double bytes_per_element);

struct StrategyCosts {
  std::array<double, kNumReuseStrategies> forward_s{};
  std::array<double, kNumReuseStrategies> backward_s{};
  std::array<double, kNumReuseStrategies> total_s{};
  ReuseStrategy best = ReuseStrategy::kNone;      // lowest total; ties -> earlier in the table
  ReuseStrategy best_reuse = ReuseStrategy::kS1;  // lowest total among S1-S4; same tie rule

  double total(ReuseStrategy s) const { return total_s[static_cast<std::size_t>(s)]; }
};

// Throws InputError naming the field when a size is < 1 or a throughput or factor is not finite
// and > 0.
void validate(const StrategyModelParams& params);

// One direction's C for a given Q, with the factors of `strategy`.
double direction_cost_s(const StrategyModelParams& params, ReuseStrategy strategy,
                        const StrategyQ& q);

StrategyCosts strategy_costs(const StrategyModelParams& params);

}  // namespace moesim::search
