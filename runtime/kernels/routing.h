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

// One token's routing is the work of kRouteLanes lanes: lane l handles experts l, l + 32, l + 64,
// ... (on a GPU a warp per token, so that the logits are read coalesced and the O(E k) top-k
// search is split 32 ways). The lanes combine their parts by a butterfly over lane ^ 16, ^ 8, ...,
// ^ 1 (__shfl_xor_sync on a GPU). route_token below runs the whole token for any `Lanes`: the
// CUDA kernel's one lane per thread, or HostLanes, which plays the 32 lanes in turn and combines
// them in the same butterfly, so that the host computes the same sums in the same order.
inline constexpr int kRouteLanes = 32;

// An expert and its probability; e < 0 is no expert (a lane with nothing left to offer).
struct RoutePick {
  float p = 0.f;
  int e = -1;
};

// The pick ranked first by ranks_before. A total order, so the butterfly gives every lane the
// same pick whatever the order it meets the candidates in.
MOESIM_HOST_DEVICE inline RoutePick first_ranked(RoutePick a, RoutePick b) {
  if (a.e < 0) return b;
  if (b.e < 0) return a;
  return ranks_before(a.p, a.e, b.p, b.e) ? a : b;
}

MOESIM_HOST_DEVICE inline float larger(float a, float b) { return b > a ? b : a; }

// Lane `lane`'s part of each step of route_token.
MOESIM_HOST_DEVICE inline float lane_logit_max(const float* logits, int experts, int lane) {
  float mx = -INFINITY;
  for (int e = lane; e < experts; e += kRouteLanes) mx = larger(mx, logits[e]);
  return mx;
}

MOESIM_HOST_DEVICE inline float lane_exp_sum(const float* logits, int experts, int lane, float mx, float* p) {
  float sum = 0.f;
  for (int e = lane; e < experts; e += kRouteLanes) sum += (p[e] = expf(logits[e] - mx));
  return sum;
}

MOESIM_HOST_DEVICE inline void lane_divide(float* p, int experts, int lane, float sum) {
  for (int e = lane; e < experts; e += kRouteLanes) p[e] /= sum;
}

// The lane's best expert ranked after `previous` (all of them when previous.e < 0).
MOESIM_HOST_DEVICE inline RoutePick lane_best_after(const float* p, int experts, int lane, RoutePick previous) {
  RoutePick best;
  for (int e = lane; e < experts; e += kRouteLanes)
    if (previous.e < 0 || ranks_before(previous.p, previous.e, p[e], e)) best = first_ranked(best, RoutePick{p[e], e});
  return best;
}

// One token: p = softmax(logits) (max-subtracted, fp32); idx / score = its first k experts in the
// order ranks_before and their probabilities (divided by their sum when `normalize`). Pick j is the
// best expert ranked after pick j - 1, which is the j-th of the order: no list of taken experts.
// `Lanes` gives: lane(); each(f) runs f(lane) for its lanes; max(f), sum(f) and best(f) combine
// f(lane) of every lane by the butterfly (with larger, +, first_ranked) and return the result to
// every lane; leader() is true for the one lane that writes the choices.
template <typename Lanes>
MOESIM_HOST_DEVICE inline void route_token(Lanes& lanes, const float* logits, int experts, int top_k, bool normalize,
                                           float* p, std::int32_t* idx, float* score) {
  const float mx = lanes.max([&](int lane) { return lane_logit_max(logits, experts, lane); });
  const float sum = lanes.sum([&](int lane) { return lane_exp_sum(logits, experts, lane, mx, p); });
  lanes.each([&](int lane) { lane_divide(p, experts, lane, sum); });
  float total = 0.f;
  RoutePick previous;
  for (int j = 0; j < top_k; ++j) {
    const RoutePick best = lanes.best([&](int lane) { return lane_best_after(p, experts, lane, previous); });
    if (lanes.leader()) {
      idx[j] = best.e;
      score[j] = best.p;
    }
    total += best.p;
    previous = best;
  }
  if (normalize && lanes.leader())
    for (int j = 0; j < top_k; ++j) score[j] /= total;
}

// The 32 lanes played in turn on the host, combined in the GPU's butterfly order.
struct HostLanes {
  template <typename T, typename Part, typename Combine>
  static T butterfly(Part part, Combine combine) {
    T v[kRouteLanes], next[kRouteLanes];
    for (int l = 0; l < kRouteLanes; ++l) v[l] = part(l);
    for (int offset = kRouteLanes / 2; offset > 0; offset /= 2) {
      for (int l = 0; l < kRouteLanes; ++l) next[l] = combine(v[l], v[l ^ offset]);  // own + partner's
      for (int l = 0; l < kRouteLanes; ++l) v[l] = next[l];
    }
    return v[0];  // every lane holds the same value
  }
  template <typename F>
  void each(F f) {
    for (int l = 0; l < kRouteLanes; ++l) f(l);
  }
  template <typename F>
  float max(F f) {
    return butterfly<float>(f, larger);
  }
  template <typename F>
  float sum(F f) {
    return butterfly<float>(f, [](float a, float b) { return a + b; });
  }
  template <typename F>
  RoutePick best(F f) {
    return butterfly<RoutePick>(f, first_ranked);
  }
  bool leader() const { return true; }
};

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
