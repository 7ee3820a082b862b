// Routing math written once for the CUDA kernels (moe_kernels.cu) and their host versions
// (host_kernels.cc): the per-token softmax and top-k, the per-token router gradient, and the steps
// of the GPU's capacity assignment. Host tests therefore run the very code the GPU runs, apart from
// the parallel sort the assignment relies on (cub::DeviceRadixSort, stable by its documentation).
//
// No fixed-size per-token arrays: any top_k <= experts, any number of experts.
#pragma once

#include <math.h>

#include <cstdint>

#include "runtime/kernels/dispatch_layout.h"  // MOESIM_HOST_DEVICE, dispatch_row
#include "runtime/kernels/kernel_args.h"

namespace moesim::runtime {

// The top-k order: descending probability, a tie to the lower expert index. NaN ranks after every
// number, so the order is total and top-k always finds k experts even from broken logits (the
// reference check then reports the mismatch instead of the kernel writing out of bounds).
MOESIM_HOST_DEVICE inline bool ranks_before(float pa, int a, float pb, int b) {
  const bool nan_a = pa != pa, nan_b = pb != pb;
  if (nan_a != nan_b) return nan_b;
  if (!nan_a && pa != pb) return pa > pb;
  return a < b;
}

// One token: p = softmax(logits) (max-subtracted, fp32); idx / score = its first k experts in the
// order ranks_before and their probabilities (divided by their sum when `normalize`). Pick j is the
// best expert ranked after pick j - 1, which is the j-th of the order: no list of taken experts.
MOESIM_HOST_DEVICE inline void route_token(const float* logits, int experts, int top_k, bool normalize, float* p,
                                           std::int32_t* idx, float* score) {
  float mx = logits[0];
  for (int e = 1; e < experts; ++e) mx = logits[e] > mx ? logits[e] : mx;
  float sum = 0.f;
  for (int e = 0; e < experts; ++e) sum += (p[e] = expf(logits[e] - mx));
  for (int e = 0; e < experts; ++e) p[e] /= sum;
  float total = 0.f;
  int previous = -1;
  for (int j = 0; j < top_k; ++j) {
    int best = -1;
    for (int e = 0; e < experts; ++e) {
      if (previous >= 0 && !ranks_before(p[previous], previous, p[e], e)) continue;
      if (best < 0 || ranks_before(p[e], e, p[best], best)) best = e;
    }
    idx[j] = best;
    score[j] = p[best];
    total += p[best];
    previous = best;
  }
  if (normalize)
    for (int j = 0; j < top_k; ++j) score[j] /= total;
}

// The router gradient of one token (kernel_args.h, RouteBackwardArgs): with the gradient dp_j of
// the probability of choice j (ds_j, or (ds_j - sum_i ds_i s_i) / S when normalized by S, the
// chosen probabilities' sum), dlogit_e = p_e (sum of dp_j over the choices j of e - sum_j dp_j p_j).
struct RouteGradTerms {
  float score_dot = 0.f;  // sum_j ds_j s_j
  float chosen = 0.f;     // S
  float dot = 0.f;        // sum_j dp_j p_idx_j
};

MOESIM_HOST_DEVICE inline float choice_grad(float ds, const RouteGradTerms& g, bool normalize) {
  return normalize ? (ds - g.score_dot) / g.chosen : ds;
}

MOESIM_HOST_DEVICE inline RouteGradTerms route_grad_terms(const float* p, const std::int32_t* idx, const float* score,
                                                          const float* ds, int top_k, bool normalize) {
  RouteGradTerms g;
  for (int j = 0; j < top_k; ++j) {
    g.chosen += p[idx[j]];
    g.score_dot += ds[j] * score[j];
  }
  for (int j = 0; j < top_k; ++j) g.dot += choice_grad(ds[j], g, normalize) * p[idx[j]];
  return g;
}

MOESIM_HOST_DEVICE inline float route_dlogit(int e, const float* p, const std::int32_t* idx, const float* ds, int top_k,
                                             bool normalize, const RouteGradTerms& g) {
  float d = 0.f;
  for (int j = 0; j < top_k; ++j)
    if (idx[j] == e) d += choice_grad(ds[j], g, normalize);
  return p[e] * (d - g.dot);
}

// The GPU's capacity assignment, in steps that each run one thread per element (moe_kernels.cu):
//   1. the choices in (j, t) order, element i = j * tokens + t, keyed by their expert;
//   2. a stable sort by key (cub::DeviceRadixSort), carrying i along;
//   3. every sorted position that starts an expert's run records it;
//   4. every sorted position places its choice: slot = position - its run's start.
// A stable sort keeps the (j, t) order within each expert, so slot is the number of earlier
// assignments to the expert in that order: AssignArgs' definition, which host::assign runs
// sequentially. Before step 4, row_token and row_choice must be -1 and tokens_per_expert 0 (the
// experts nobody chose are not visited).
MOESIM_HOST_DEVICE inline std::uint32_t assignment_key(const std::int32_t* topk_idx, std::int64_t tokens, int top_k,
                                                       std::int64_t i) {
  return static_cast<std::uint32_t>(topk_idx[(i % tokens) * top_k + i / tokens]);
}

MOESIM_HOST_DEVICE inline void record_run_start(const std::uint32_t* sorted_keys, std::int64_t s,
                                                std::int32_t* run_start) {
  if (s == 0 || sorted_keys[s - 1] != sorted_keys[s]) run_start[sorted_keys[s]] = static_cast<std::int32_t>(s);
}

MOESIM_HOST_DEVICE inline void place_assignment(const AssignArgs& a, const std::uint32_t* sorted_keys,
                                                const std::int32_t* sorted_choice, const std::int32_t* run_start,
                                                std::int64_t s) {
  const std::int64_t n = a.tokens * a.top_k;
  const int e = static_cast<int>(sorted_keys[s]);
  const std::int64_t slot = s - run_start[e];
  const std::int64_t i = sorted_choice[s];
  const std::int64_t t = i % a.tokens;
  const int j = static_cast<int>(i / a.tokens);
  std::int32_t& out = a.topk_row[t * a.top_k + j];
  if (slot < a.capacity) {
    const std::int64_t row = dispatch_row(e, slot, a.experts, a.capacity, a.chunks);
    out = static_cast<std::int32_t>(row);
    a.row_token[row] = static_cast<std::int32_t>(t);
    a.row_choice[row] = j;
  } else {
    out = -1;
  }
  if (s == n - 1 || sorted_keys[s + 1] != sorted_keys[s])  // the run's last element knows its length
    a.tokens_per_expert[e] = static_cast<std::int32_t>(slot + 1 < a.capacity ? slot + 1 : a.capacity);
}

}  // namespace moesim::runtime
