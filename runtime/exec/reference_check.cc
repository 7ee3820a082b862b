#include "runtime/exec/reference_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/kernels/dispatch_layout.h"
#include "runtime/reference/expert_parallel.h"
#include "sim/core/error.h"

namespace moesim::runtime {

namespace ref = reference;

bool CheckReport::ok() const {
  return std::all_of(entries.begin(), entries.end(), [](const CheckEntry& e) { return e.ok(); });
}

double CheckReport::worst_ratio() const {
  double worst = 0;
  for (const CheckEntry& e : entries)
    worst = std::max(worst, e.tolerance > 0 ? e.relative / e.tolerance : (e.relative > 0 ? 1e300 : 0.0));
  return worst;
}

namespace {

ref::Matrix to_matrix(const float* values, std::int64_t rows, std::int64_t cols) {
  ref::Matrix m(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) m.values[static_cast<std::size_t>(i)] = values[i];
  return m;
}

}  // namespace

reference::Matrix logit_error_bounds(const reference::Matrix& x, const reference::Matrix& gate, DType gemm_dtype) {
  MOESIM_CHECK(x.cols == gate.rows, "x and the gate share the model dimension");
  double operand_roundoff = 0;  // per operand, relative
  switch (gemm_dtype) {
    case DType::kFp32: operand_roundoff = 0; break;
    case DType::kTf32: operand_roundoff = std::ldexp(1.0, -10); break;
    case DType::kBf16: operand_roundoff = std::ldexp(1.0, -8); break;
    case DType::kFp16: operand_roundoff = std::ldexp(1.0, -11); break;
    case DType::kFp8: operand_roundoff = std::ldexp(1.0, -4); break;  // E4M3; the runtime refuses fp8
  }
  const double factor = 2 * operand_roundoff + static_cast<double>(x.cols) * std::ldexp(1.0, -24);
  ref::Matrix bound(x.rows, gate.cols);
  for (std::int64_t t = 0; t < x.rows; ++t)
    for (std::int64_t k = 0; k < x.cols; ++k) {
      const double xa = std::abs(x.at(t, k));
      for (std::int64_t e = 0; e < gate.cols; ++e) bound.at(t, e) += xa * std::abs(gate.at(k, e));
    }
  for (double& b : bound.values) b *= factor;
  return bound;
}

namespace {

// Whether the reference's experts `mine` and the device's `theirs` tie for token t.
bool near_tie(const reference::Routing& own, const reference::Matrix* logit_bound, std::int64_t t, int mine,
              int theirs) {
  const double pm = own.probs.at(t, mine), pt = own.probs.at(t, theirs);
  if (std::abs(pt - pm) <= kAmbiguousMargin) return true;
  if (logit_bound == nullptr || pm <= 0 || pt <= 0) return false;
  return std::abs(std::log(pm) - std::log(pt)) <= logit_bound->at(t, mine) + logit_bound->at(t, theirs);
}

}  // namespace

RoutingJudgement judge_routing(const reference::Routing& own, const std::vector<std::int32_t>& device_topk,
                               std::int64_t tokens, int top_k, int num_experts,
                               const reference::Matrix* logit_bound) {
  RoutingJudgement j;
  j.forced.assign(own.topk_idx.begin(), own.topk_idx.end());
  std::vector<bool> taken(static_cast<std::size_t>(num_experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    const auto at = [&](int c) { return static_cast<std::size_t>(t * top_k + c); };
    std::fill(taken.begin(), taken.end(), false);
    bool valid = true;
    for (int c = 0; c < top_k; ++c) {
      const std::int32_t e = device_topk[at(c)];
      valid = valid && e >= 0 && e < num_experts && !taken[static_cast<std::size_t>(e)];
      if (valid) taken[static_cast<std::size_t>(e)] = true;
    }
    if (!valid) {  // not a routing at all: an error, and the reference keeps its own choice
      j.errors += 1;
      continue;
    }
    bool same = true, near = true;
    for (int c = 0; c < top_k; ++c) {
      const int mine = own.topk_idx[at(c)], theirs = device_topk[at(c)];
      if (mine == theirs) continue;
      same = false;
      near = near && near_tie(own, logit_bound, t, mine, theirs);
    }
    for (int c = 0; c < top_k; ++c) j.forced[at(c)] = device_topk[at(c)];
    if (same) continue;
    if (near)
      j.ambiguous += 1;
    else
      j.errors += 1;
  }
  return j;
}

CheckReport check_against_reference(const LayerExecutor& executor, const ModelSpec& model, const LayerDims& d,
                                    bool normalize_scores) {
  const std::vector<int> ranks = executor.local_ranks();
  if (static_cast<int>(ranks.size()) != d.ep_size)
    throw InputError("the reference check needs every rank of the layer in this process (" +
                     std::to_string(ranks.size()) + " of " + std::to_string(d.ep_size) + " are local)");
  CheckReport report;
  for (int l = 0; l < executor.num_layers(); ++l) {
    std::vector<RankValues> got;
    for (int r = 0; r < d.ep_size; ++r) got.push_back(executor.download(r, l));
    append_layer(report, check_against_reference(got, model, d, normalize_scores), l, executor.num_layers());
  }
  return report;
}

void append_layer(CheckReport& report, const CheckReport& layer_report, int layer, int num_layers) {
  const std::string prefix = num_layers > 1 ? "L" + std::to_string(layer) + "." : "";
  for (CheckEntry e : layer_report.entries) {
    e.tensor = prefix + e.tensor;
    report.entries.push_back(std::move(e));
  }
  report.topk_margin = layer == 0 ? layer_report.topk_margin : std::min(report.topk_margin, layer_report.topk_margin);
  report.ambiguous_tokens += layer_report.ambiguous_tokens;
}

CheckReport check_against_reference(const std::vector<RankValues>& got, const ModelSpec& model, const LayerDims& d,
                                    bool normalize_scores) {
  if (static_cast<int>(got.size()) != d.ep_size)
    throw InputError("the reference check needs the values of every rank of the layer (" + std::to_string(got.size()) +
                     " of " + std::to_string(d.ep_size) + " given)");
  ref::MoeLayerShape shape = ref::MoeLayerShape::from_specs(model, d);
  shape.scores = normalize_scores ? ref::ScoreNormalization::kTopKNormalized : ref::ScoreNormalization::kRaw;
  const std::int64_t B = d.tokens, M = d.d_model, H = d.d_ffn, F = d.fc1_out;
  const int E = d.num_experts, El = d.local_experts, R = d.ep_size;

  ref::MoeLayerParams params;
  params.gate = to_matrix(got[0].gate.data(), M, E);
  for (int e = 0; e < E; ++e) {
    const RankValues& owner = got[static_cast<std::size_t>(e / El)];
    params.w1.push_back(to_matrix(owner.w1.data() + (e % El) * M * F, M, F));
    params.w2.push_back(to_matrix(owner.w2.data() + (e % El) * H * M, H, M));
    params.b1.emplace_back(1, 0);
    params.b2.emplace_back(1, 0);
  }
  const std::int64_t Hs = shape.shared_d_ffn, Fs = shape.shared_fc1_out();
  if (Hs > 0) {
    if (static_cast<std::int64_t>(got[0].shared_w1.size()) != M * Fs ||
        static_cast<std::int64_t>(got[0].shared_w2.size()) != Hs * M)
      throw InputError("the reference check needs the shared experts' parameters of rank 0");
    params.shared_w1 = to_matrix(got[0].shared_w1.data(), M, Fs);
    params.shared_w2 = to_matrix(got[0].shared_w2.data(), Hs, M);
  }
  std::vector<ref::Matrix> xs, dys;
  std::vector<std::vector<int>> forced;
  std::vector<double> choice_errors(static_cast<std::size_t>(R), 0.0);
  CheckReport report;
  for (int r = 0; r < R; ++r) {
    const RankValues& v = got[static_cast<std::size_t>(r)];
    if (static_cast<std::int64_t>(v.x.size()) != B * M || static_cast<std::int64_t>(v.dy.size()) != B * M)
      throw InputError("the reference check needs every layer's x and dY (an executor that keeps them)");
    xs.push_back(to_matrix(v.x.data(), B, M));
    dys.push_back(to_matrix(v.dy.data(), B, M));
    if (static_cast<std::int64_t>(v.topk_idx.size()) != B * d.top_k)
      throw InputError("the reference check needs B x k top-k indices per rank");
    const ref::Matrix bound = logit_error_bounds(xs.back(), params.gate, d.gemm_dtype);
    const RoutingJudgement j =
        judge_routing(ref::route(shape, params.gate, xs.back()), v.topk_idx, B, d.top_k, E, &bound);
    forced.push_back(j.forced);
    choice_errors[static_cast<std::size_t>(r)] = static_cast<double>(j.errors);
    report.ambiguous_tokens += j.ambiguous;
  }
  // The reference takes the experts the devices chose (where valid), so that the outputs compare
  // like with like; judge_routing has counted the choices that were not near-ties.
  const ref::ExpertParallelResult want = ref::run_unpartitioned(shape, params, xs, dys, &forced);
  const ref::Tolerance tol = ref::tolerance_for(d.gemm_dtype);

  report.topk_margin = std::numeric_limits<double>::infinity();
  auto add = [&](const std::string& name, const ref::Matrix& g, const ref::Matrix& w, double t) {
    report.entries.push_back(CheckEntry{name, ref::compare(g, w).relative(), t});
  };
  ref::Matrix dgate(M, E);
  for (int r = 0; r < R; ++r) {
    const RankValues& v = got[static_cast<std::size_t>(r)];
    const std::string at = "@" + std::to_string(r);
    // Routing: the experts the reference would choose, up to near-ties (judge_routing), and then
    // exactly the dispatch rows its capacity assignment gives to the experts taken.
    const ref::Routing routing =
        ref::route(shape, params.gate, xs[static_cast<std::size_t>(r)], &forced[static_cast<std::size_t>(r)]);
    report.topk_margin = std::min(report.topk_margin, routing.topk_margin);
    double mismatches = choice_errors[static_cast<std::size_t>(r)];
    for (std::int64_t i = 0; i < B * d.top_k; ++i) {
      const std::int64_t slot = routing.slot[static_cast<std::size_t>(i)];
      const std::int64_t row =
          slot < 0 ? -1 : dispatch_row(routing.topk_idx[static_cast<std::size_t>(i)], slot, E, d.capacity, d.num_chunks);
      if (v.topk_row[static_cast<std::size_t>(i)] != row) mismatches += 1;
    }
    report.entries.push_back(CheckEntry{"routing" + at, mismatches, 0});
    add("y" + at, to_matrix(v.y.data(), B, M), want.y[static_cast<std::size_t>(r)], tol.forward_rel);
    add("dx" + at, to_matrix(v.dx.data(), B, M), want.dx[static_cast<std::size_t>(r)], tol.gradient_rel);
    for (std::int64_t i = 0; i < M * E; ++i) dgate.values[static_cast<std::size_t>(i)] += v.dgate[static_cast<std::size_t>(i)];
  }
  add("dgate", dgate, want.grads.dgate, tol.gradient_rel);
  if (Hs > 0) {
    // Replicated like the gate: every rank's gradient of its own tokens, summed.
    ref::Matrix dw1(M, Fs), dw2(Hs, M);
    for (const RankValues& v : got) {
      for (std::int64_t i = 0; i < M * Fs; ++i) dw1.values[static_cast<std::size_t>(i)] += v.dshared_w1[static_cast<std::size_t>(i)];
      for (std::int64_t i = 0; i < Hs * M; ++i) dw2.values[static_cast<std::size_t>(i)] += v.dshared_w2[static_cast<std::size_t>(i)];
    }
    add("dshared_w1", dw1, want.grads.dshared_w1, tol.gradient_rel);
    add("dshared_w2", dw2, want.grads.dshared_w2, tol.gradient_rel);
  }
  for (int e = 0; e < E; ++e) {
    const RankValues& owner = got[static_cast<std::size_t>(e / El)];
    const std::string at = "[e" + std::to_string(e) + "]";
    add("dw1" + at, to_matrix(owner.dw1.data() + (e % El) * M * F, M, F), want.grads.dw1[static_cast<std::size_t>(e)],
        tol.gradient_rel);
    add("dw2" + at, to_matrix(owner.dw2.data() + (e % El) * H * M, H, M), want.grads.dw2[static_cast<std::size_t>(e)],
        tol.gradient_rel);
  }
  return report;
}

}  // namespace moesim::runtime
