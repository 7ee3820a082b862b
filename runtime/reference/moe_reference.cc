#include "runtime/reference/moe_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "sim/core/error.h"

namespace moesim::runtime::reference {

Matrix::Matrix(std::int64_t r, std::int64_t c)
    : rows(r), cols(c), values(static_cast<std::size_t>(r * c), 0.0) {}

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a fixed, portable stream, unlike std distributions whose
// output is implementation-defined.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// C = A B (+ bias), each element summed over the inner index in ascending order.
Matrix matmul(const Matrix& a, const Matrix& b, const Matrix* bias) {
  MOESIM_CHECK(a.cols == b.rows, "inner dimensions differ");
  Matrix c(a.rows, b.cols);
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const double* ar = a.row(r);
    for (std::int64_t j = 0; j < b.cols; ++j) {
      double acc = 0;
      for (std::int64_t i = 0; i < a.cols; ++i) acc += ar[i] * b.at(i, j);
      c.at(r, j) = bias != nullptr && bias->cols > 0 ? acc + bias->at(0, j) : acc;
    }
  }
  return c;
}

// C = A B^T.
Matrix matmul_bt(const Matrix& a, const Matrix& b) {
  MOESIM_CHECK(a.cols == b.cols, "inner dimensions differ");
  Matrix c(a.rows, b.rows);
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const double* ar = a.row(r);
    for (std::int64_t j = 0; j < b.rows; ++j) {
      const double* bj = b.row(j);
      double acc = 0;
      for (std::int64_t i = 0; i < a.cols; ++i) acc += ar[i] * bj[i];
      c.at(r, j) = acc;
    }
  }
  return c;
}

// acc += A^T G, row by row: a weight gradient accumulates its rows in the order they are given,
// so a caller that feeds rows in the same order gets the same bits.
void accumulate_at_g(const Matrix& a, const Matrix& g, Matrix& acc) {
  MOESIM_CHECK(a.rows == g.rows && acc.rows == a.cols && acc.cols == g.cols, "shape mismatch");
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t i = 0; i < a.cols; ++i) {
      const double ari = a.at(r, i);
      double* acc_i = acc.row(i);
      const double* gr = g.row(r);
      for (std::int64_t j = 0; j < g.cols; ++j) acc_i[j] += ari * gr[j];
    }
}

void accumulate_colsum(const Matrix& g, Matrix& acc) {
  if (acc.cols == 0) return;  // no bias
  for (std::int64_t r = 0; r < g.rows; ++r)
    for (std::int64_t j = 0; j < g.cols; ++j) acc.at(0, j) += g.at(r, j);
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

std::size_t idx(std::int64_t t, int j, int k) { return static_cast<std::size_t>(t * k + j); }

}  // namespace

Matrix random_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed, double scale) {
  Matrix m(rows, cols);
  std::uint64_t state = seed;
  for (double& v : m.values) {
    // 53 random bits -> [0, 1) exactly representable, then [-scale, scale).
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    v = (2.0 * u - 1.0) * scale;
  }
  return m;
}

MoeLayerShape MoeLayerShape::from_specs(const ModelSpec& model, const LayerDims& dims) {
  MoeLayerShape s;
  s.tokens = dims.tokens;
  s.d_model = dims.d_model;
  s.d_ffn = dims.d_ffn;
  s.shared_d_ffn = static_cast<std::int64_t>(model.shared_experts.count) * model.shared_experts.d_ffn;
  s.num_experts = dims.num_experts;
  s.top_k = dims.top_k;
  s.capacity = dims.capacity;
  s.activation = model.activation;
  s.validate();
  return s;
}

void MoeLayerShape::validate() const {
  if (tokens <= 0 || d_model <= 0 || d_ffn <= 0 || num_experts <= 0 || capacity <= 0)
    throw InputError("MoE reference shape: tokens, d_model, d_ffn, num_experts and capacity must be "
                     "positive (got B=" + std::to_string(tokens) + ", M=" + std::to_string(d_model) +
                     ", H=" + std::to_string(d_ffn) + ", E=" + std::to_string(num_experts) +
                     ", C=" + std::to_string(capacity) + ")");
  if (top_k < 1 || top_k > num_experts)
    throw InputError("MoE reference shape: top_k must be in [1, E = " + std::to_string(num_experts) +
                     "], got " + std::to_string(top_k));
  if (shared_d_ffn < 0)
    throw InputError("MoE reference shape: the shared experts' width must not be negative, got " +
                     std::to_string(shared_d_ffn));
}

MoeLayerParams random_params(const MoeLayerShape& shape, std::uint64_t seed) {
  shape.validate();
  const std::int64_t M = shape.d_model, H = shape.d_ffn, F = shape.fc1_out();
  MoeLayerParams p;
  // The gate at unit scale spreads the logits, so top-k picks are far from ties.
  p.gate = random_matrix(M, shape.num_experts, seed, 1.0);
  for (int e = 0; e < shape.num_experts; ++e) {
    const std::uint64_t s = seed + 1000003ULL * static_cast<std::uint64_t>(e + 1);
    p.w1.push_back(random_matrix(M, F, s + 1, 1.0 / std::sqrt(static_cast<double>(M))));
    p.w2.push_back(random_matrix(H, M, s + 2, 1.0 / std::sqrt(static_cast<double>(H))));
    p.b1.push_back(shape.bias ? random_matrix(1, F, s + 3, 0.1) : Matrix(1, 0));
    p.b2.push_back(shape.bias ? random_matrix(1, M, s + 4, 0.1) : Matrix(1, 0));
  }
  if (shape.shared_d_ffn > 0) {
    const std::uint64_t s = seed + kSharedSeedOffset;
    p.shared_w1 = random_matrix(M, shape.shared_fc1_out(), s + 1, 1.0 / std::sqrt(static_cast<double>(M)));
    p.shared_w2 = random_matrix(shape.shared_d_ffn, M, s + 2,
                                1.0 / std::sqrt(static_cast<double>(shape.shared_d_ffn)));
  }
  return p;
}

Routing route(const MoeLayerShape& shape, const Matrix& gate, const Matrix& x, const std::vector<int>* forced_topk) {
  shape.validate();
  if (x.rows != shape.tokens || x.cols != shape.d_model)
    throw InputError("MoE reference: x must be B x M = " + std::to_string(shape.tokens) + " x " +
                     std::to_string(shape.d_model));
  const std::int64_t B = shape.tokens;
  const int E = shape.num_experts, k = shape.top_k;
  if (forced_topk != nullptr && static_cast<std::int64_t>(forced_topk->size()) != B * k)
    throw InputError("MoE reference: a forced top-k needs B x k = " + std::to_string(B * k) + " indices, got " +
                     std::to_string(forced_topk->size()));
  Routing r;
  r.logits = matmul(x, gate, nullptr);
  r.probs = Matrix(B, E);
  r.topk_idx.assign(static_cast<std::size_t>(B * k), -1);
  r.topk_score.assign(static_cast<std::size_t>(B * k), 0.0);
  r.slot.assign(static_cast<std::size_t>(B * k), -1);
  r.num_tokens_per_expert.assign(static_cast<std::size_t>(E), 0);
  r.topk_margin = std::numeric_limits<double>::infinity();
  std::vector<bool> taken(static_cast<std::size_t>(E));
  for (std::int64_t t = 0; t < B; ++t) {
    double mx = r.logits.at(t, 0);
    for (int e = 1; e < E; ++e) mx = std::max(mx, r.logits.at(t, e));
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += (r.probs.at(t, e) = std::exp(r.logits.at(t, e) - mx));
    for (int e = 0; e < E; ++e) r.probs.at(t, e) /= sum;
    // Repeated arg-max with a strict comparison: among equal probabilities the lower index wins.
    std::fill(taken.begin(), taken.end(), false);
    double chosen_sum = 0;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < E; ++e)
        if (!taken[static_cast<std::size_t>(e)] && (best < 0 || r.probs.at(t, e) > r.probs.at(t, best))) best = e;
      taken[static_cast<std::size_t>(best)] = true;
      r.topk_idx[idx(t, j, k)] = best;
      chosen_sum += r.probs.at(t, best);
    }
    double best_rest = -1;
    for (int e = 0; e < E; ++e)
      if (!taken[static_cast<std::size_t>(e)]) best_rest = std::max(best_rest, r.probs.at(t, e));
    if (best_rest >= 0)
      r.topk_margin = std::min(r.topk_margin, r.probs.at(t, r.topk_idx[idx(t, k - 1, k)]) - best_rest);
    if (forced_topk != nullptr) {
      chosen_sum = 0;
      std::fill(taken.begin(), taken.end(), false);
      for (int j = 0; j < k; ++j) {
        const int e = (*forced_topk)[idx(t, j, k)];
        if (e < 0 || e >= E || taken[static_cast<std::size_t>(e)])
          throw InputError("MoE reference: forced expert " + std::to_string(e) + " of token " + std::to_string(t) +
                           " is out of range or repeated");
        taken[static_cast<std::size_t>(e)] = true;
        r.topk_idx[idx(t, j, k)] = e;
        chosen_sum += r.probs.at(t, e);
      }
    }
    for (int j = 0; j < k; ++j) {
      const double p = r.probs.at(t, r.topk_idx[idx(t, j, k)]);
      r.topk_score[idx(t, j, k)] = shape.scores == ScoreNormalization::kRaw ? p : p / chosen_sum;
    }
  }
  // Capacity: first choices of every token before second choices, each in token order.
  for (int j = 0; j < k; ++j)
    for (std::int64_t t = 0; t < B; ++t) {
      std::int64_t& count = r.num_tokens_per_expert[static_cast<std::size_t>(r.topk_idx[idx(t, j, k)])];
      if (count < shape.capacity) {
        r.slot[idx(t, j, k)] = count++;
      } else {
        ++r.num_dropped;
      }
    }
  return r;
}

namespace detail {

void activation_forward(const MoeLayerShape& shape, const Matrix& h, Matrix& a) {
  const std::int64_t H = shape.d_ffn;
  a = Matrix(h.rows, H);
  for (std::int64_t r = 0; r < h.rows; ++r)
    for (std::int64_t c = 0; c < H; ++c) {
      const double v = h.at(r, c);
      switch (shape.activation) {
        case Activation::kRelu:
          a.at(r, c) = v > 0 ? v : 0.0;
          break;
        case Activation::kGelu:
          a.at(r, c) = 0.5 * v * (1.0 + std::erf(v * std::numbers::sqrt2 / 2));
          break;
        case Activation::kSwiglu:
          a.at(r, c) = v * sigmoid(v) * h.at(r, H + c);
          break;
      }
    }
}

namespace {

// dH from dA and h.
Matrix activation_backward(const MoeLayerShape& shape, const Matrix& h, const Matrix& da) {
  const std::int64_t H = shape.d_ffn;
  Matrix dh(h.rows, h.cols);
  for (std::int64_t r = 0; r < h.rows; ++r)
    for (std::int64_t c = 0; c < H; ++c) {
      const double v = h.at(r, c), g = da.at(r, c);
      switch (shape.activation) {
        case Activation::kRelu:
          dh.at(r, c) = v > 0 ? g : 0.0;
          break;
        case Activation::kGelu: {
          const double cdf = 0.5 * (1.0 + std::erf(v * std::numbers::sqrt2 / 2));
          const double pdf = std::exp(-0.5 * v * v) * std::numbers::inv_sqrtpi / std::numbers::sqrt2;
          dh.at(r, c) = g * (cdf + v * pdf);
          break;
        }
        case Activation::kSwiglu: {
          // a = silu(v) * u; silu'(v) = sigma(v) * (1 + v * (1 - sigma(v))).
          const double sg = sigmoid(v), u = h.at(r, H + c);
          dh.at(r, c) = g * u * sg * (1.0 + v * (1.0 - sg));
          dh.at(r, H + c) = g * v * sg;
          break;
        }
      }
    }
  return dh;
}

}  // namespace

Matrix fc1_rows(const MoeLayerParams& params, int expert, const Matrix& in) {
  const auto e = static_cast<std::size_t>(expert);
  return matmul(in, params.w1[e], &params.b1[e]);
}

void expert_forward_rows(const MoeLayerShape& shape, const MoeLayerParams& params, int expert,
                         const Matrix& in, Matrix& h, Matrix& a, Matrix& out) {
  const auto e = static_cast<std::size_t>(expert);
  h = fc1_rows(params, expert, in);
  activation_forward(shape, h, a);
  out = matmul(a, params.w2[e], &params.b2[e]);
}

Matrix expert_backward_rows(const MoeLayerShape& shape, const MoeLayerParams& params, int expert,
                            const Matrix& in, const Matrix& h, const Matrix& dout, Matrix& dw1,
                            Matrix& db1, Matrix& dw2, Matrix& db2) {
  const auto e = static_cast<std::size_t>(expert);
  // a is recomputed from h elementwise, bit-identical to the forward's.
  Matrix a;
  activation_forward(shape, h, a);
  accumulate_at_g(a, dout, dw2);
  accumulate_colsum(dout, db2);
  const Matrix da = matmul_bt(dout, params.w2[e]);
  const Matrix dh = activation_backward(shape, h, da);
  accumulate_at_g(in, dh, dw1);
  accumulate_colsum(dh, db1);
  return matmul_bt(dh, params.w1[e]);
}

namespace {

// The shared experts as expert 0 of a layer of width Hs without biases.
MoeLayerShape shared_shape(const MoeLayerShape& shape) {
  MoeLayerShape s = shape;
  s.d_ffn = shape.shared_d_ffn;
  s.bias = false;
  return s;
}

MoeLayerParams shared_as_expert(const MoeLayerParams& params) {
  MoeLayerParams p;
  p.w1 = {params.shared_w1};
  p.w2 = {params.shared_w2};
  p.b1 = {Matrix(1, 0)};
  p.b2 = {Matrix(1, 0)};
  return p;
}

}  // namespace

void shared_forward(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x, Matrix& h,
                    Matrix& y) {
  Matrix a, out;
  expert_forward_rows(shared_shape(shape), shared_as_expert(params), 0, x, h, a, out);
  for (std::size_t i = 0; i < y.values.size(); ++i) y.values[i] += out.values[i];
}

Matrix shared_backward(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x, const Matrix& h,
                       const Matrix& dy, MoeGradients& g) {
  Matrix no_db1(1, 0), no_db2(1, 0);
  return expert_backward_rows(shared_shape(shape), shared_as_expert(params), 0, x, h, dy, g.dshared_w1, no_db1,
                              g.dshared_w2, no_db2);
}

Matrix decode(const MoeLayerShape& shape, const Routing& routing, const Matrix& expert_out) {
  const std::int64_t B = shape.tokens, M = shape.d_model, C = shape.capacity;
  const int k = shape.top_k;
  Matrix y(B, M);
  for (std::int64_t t = 0; t < B; ++t)
    for (int j = 0; j < k; ++j) {
      const std::int64_t slot = routing.slot[idx(t, j, k)];
      if (slot < 0) continue;
      const double s = routing.topk_score[idx(t, j, k)];
      const double* o = expert_out.row(routing.topk_idx[idx(t, j, k)] * C + slot);
      for (std::int64_t m = 0; m < M; ++m) y.at(t, m) += s * o[m];
    }
  return y;
}

void decode_backward(const MoeLayerShape& shape, const Routing& routing, const Matrix& expert_out,
                     const Matrix& dy, Matrix& dout, std::vector<double>& dscores) {
  const std::int64_t B = shape.tokens, M = shape.d_model, C = shape.capacity;
  const int k = shape.top_k;
  dout = Matrix(shape.dispatch_rows(), M);
  dscores.assign(static_cast<std::size_t>(B * k), 0.0);
  for (std::int64_t t = 0; t < B; ++t)
    for (int j = 0; j < k; ++j) {
      const std::int64_t slot = routing.slot[idx(t, j, k)];
      if (slot < 0) continue;
      const std::int64_t row = routing.topk_idx[idx(t, j, k)] * C + slot;
      const double s = routing.topk_score[idx(t, j, k)];
      double ds = 0;
      for (std::int64_t m = 0; m < M; ++m) {
        ds += dy.at(t, m) * expert_out.at(row, m);
        dout.at(row, m) = s * dy.at(t, m);
      }
      dscores[idx(t, j, k)] = ds;
    }
}

Matrix router_and_encode_backward(const MoeLayerShape& shape, const MoeLayerParams& params,
                                  const Matrix& x, const Routing& routing,
                                  const std::vector<double>& dscores, const Matrix& ddispatched,
                                  Matrix& dx, Matrix& dgate) {
  const std::int64_t B = shape.tokens, M = shape.d_model, C = shape.capacity;
  const int E = shape.num_experts, k = shape.top_k;
  // Encode copied x_t into each kept slot: its backward gathers and adds those rows, in j order.
  for (std::int64_t t = 0; t < B; ++t)
    for (int j = 0; j < k; ++j) {
      const std::int64_t slot = routing.slot[idx(t, j, k)];
      if (slot < 0) continue;
      const double* d = ddispatched.row(routing.topk_idx[idx(t, j, k)] * C + slot);
      for (std::int64_t m = 0; m < M; ++m) dx.at(t, m) += d[m];
    }
  Matrix dlogits(B, E);
  std::vector<double> dp(static_cast<std::size_t>(E));
  for (std::int64_t t = 0; t < B; ++t) {
    std::fill(dp.begin(), dp.end(), 0.0);
    if (shape.scores == ScoreNormalization::kRaw) {
      for (int j = 0; j < k; ++j) dp[static_cast<std::size_t>(routing.topk_idx[idx(t, j, k)])] = dscores[idx(t, j, k)];
    } else {
      // s_j = p_j / S: ds_j reaches every chosen p_i through S, dropped choices included.
      double sum_p = 0, sum_ds_s = 0;
      for (int j = 0; j < k; ++j) {
        sum_p += routing.probs.at(t, routing.topk_idx[idx(t, j, k)]);
        sum_ds_s += dscores[idx(t, j, k)] * routing.topk_score[idx(t, j, k)];
      }
      for (int j = 0; j < k; ++j)
        dp[static_cast<std::size_t>(routing.topk_idx[idx(t, j, k)])] = (dscores[idx(t, j, k)] - sum_ds_s) / sum_p;
    }
    double dot = 0;
    for (int e = 0; e < E; ++e) dot += dp[static_cast<std::size_t>(e)] * routing.probs.at(t, e);
    for (int e = 0; e < E; ++e) dlogits.at(t, e) = routing.probs.at(t, e) * (dp[static_cast<std::size_t>(e)] - dot);
  }
  accumulate_at_g(x, dlogits, dgate);
  const Matrix dx_gate = matmul_bt(dlogits, params.gate);
  for (std::size_t i = 0; i < dx.values.size(); ++i) dx.values[i] += dx_gate.values[i];
  return dlogits;
}

}  // namespace detail

MoeForward moe_forward(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x,
                       const std::vector<int>* forced_topk) {
  MoeForward f;
  f.routing = route(shape, params.gate, x, forced_topk);
  const std::int64_t C = shape.capacity, M = shape.d_model;
  f.dispatched = Matrix(shape.dispatch_rows(), M);
  for (std::int64_t t = 0; t < shape.tokens; ++t)
    for (int j = 0; j < shape.top_k; ++j) {
      const std::size_t i = idx(t, j, shape.top_k);
      if (f.routing.slot[i] < 0) continue;
      std::copy_n(x.row(t), M, f.dispatched.row(f.routing.topk_idx[i] * C + f.routing.slot[i]));
    }
  f.preact = Matrix(shape.dispatch_rows(), shape.fc1_out());
  f.act = Matrix(shape.dispatch_rows(), shape.d_ffn);
  f.expert_out = Matrix(shape.dispatch_rows(), M);
  for (int e = 0; e < shape.num_experts; ++e) {
    Matrix in(C, M), h, a, o;
    std::copy_n(f.dispatched.row(e * C), C * M, in.values.begin());
    detail::expert_forward_rows(shape, params, e, in, h, a, o);
    std::copy(h.values.begin(), h.values.end(), f.preact.row(e * C));
    std::copy(a.values.begin(), a.values.end(), f.act.row(e * C));
    std::copy(o.values.begin(), o.values.end(), f.expert_out.row(e * C));
  }
  f.y = detail::decode(shape, f.routing, f.expert_out);
  if (shape.shared_d_ffn > 0) detail::shared_forward(shape, params, x, f.shared_h, f.y);
  return f;
}

MoeGradients zero_gradients(const MoeLayerShape& shape) {
  const std::int64_t M = shape.d_model, H = shape.d_ffn, F = shape.fc1_out();
  MoeGradients g;
  g.dgate = Matrix(M, shape.num_experts);
  for (int e = 0; e < shape.num_experts; ++e) {
    g.dw1.emplace_back(M, F);
    g.db1.emplace_back(1, shape.bias ? F : 0);
    g.dw2.emplace_back(H, M);
    g.db2.emplace_back(1, shape.bias ? M : 0);
  }
  if (shape.shared_d_ffn > 0) {
    g.dshared_w1 = Matrix(M, shape.shared_fc1_out());
    g.dshared_w2 = Matrix(shape.shared_d_ffn, M);
  }
  return g;
}

void backward_accumulate(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x,
                         const MoeForward& forward, const Matrix& dy, MoeGradients& g) {
  if (dy.rows != shape.tokens || dy.cols != shape.d_model)
    throw InputError("MoE reference: dY must be B x M = " + std::to_string(shape.tokens) + " x " +
                     std::to_string(shape.d_model));
  const std::int64_t C = shape.capacity, M = shape.d_model, F = shape.fc1_out();
  g.dx = Matrix(shape.tokens, M);
  Matrix dout;
  detail::decode_backward(shape, forward.routing, forward.expert_out, dy, dout, g.dscores);
  Matrix ddispatched(shape.dispatch_rows(), M);
  for (int e = 0; e < shape.num_experts; ++e) {
    Matrix in(C, M), h(C, F), d(C, M);
    std::copy_n(forward.dispatched.row(e * C), C * M, in.values.begin());
    std::copy_n(forward.preact.row(e * C), C * F, h.values.begin());
    std::copy_n(dout.row(e * C), C * M, d.values.begin());
    const auto u = static_cast<std::size_t>(e);
    const Matrix din =
        detail::expert_backward_rows(shape, params, e, in, h, d, g.dw1[u], g.db1[u], g.dw2[u], g.db2[u]);
    std::copy(din.values.begin(), din.values.end(), ddispatched.row(e * C));
  }
  g.dlogits = detail::router_and_encode_backward(shape, params, x, forward.routing, g.dscores, ddispatched,
                                                 g.dx, g.dgate);
  if (shape.shared_d_ffn > 0) {
    const Matrix dx_shared = detail::shared_backward(shape, params, x, forward.shared_h, dy, g);
    for (std::size_t i = 0; i < g.dx.values.size(); ++i) g.dx.values[i] += dx_shared.values[i];
  }
}

MoeGradients moe_backward(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x,
                          const MoeForward& forward, const Matrix& dy) {
  MoeGradients g = zero_gradients(shape);
  backward_accumulate(shape, params, x, forward, dy, g);
  return g;
}

Tolerance tolerance_for(DType gemm_dtype) {
  switch (gemm_dtype) {
    case DType::kFp32:
      return {1e-5, 1e-4};
    case DType::kTf32:
      return {5e-3, 1e-2};
    case DType::kBf16:
      return {3e-2, 5e-2};
    case DType::kFp16:
      return {5e-3, 1e-2};
    case DType::kFp8:  // E4M3, unit roundoff 2^-4; the runtime has no FP8 GEMMs to check
      return {2.5e-1, 5e-1};
  }
  MOESIM_CHECK(false, "unknown dtype");
  return {};
}

double Comparison::relative() const {
  if (max_abs_reference == 0) return max_abs_error == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return max_abs_error / max_abs_reference;
}

Comparison compare(const Matrix& got, const Matrix& want) {
  if (got.rows != want.rows || got.cols != want.cols)
    throw InputError("compare: shapes differ (" + std::to_string(got.rows) + "x" + std::to_string(got.cols) +
                     " vs " + std::to_string(want.rows) + "x" + std::to_string(want.cols) + ")");
  Comparison c;
  for (std::size_t i = 0; i < want.values.size(); ++i) {
    c.max_abs_error = std::max(c.max_abs_error, std::abs(got.values[i] - want.values[i]));
    c.max_abs_reference = std::max(c.max_abs_reference, std::abs(want.values[i]));
  }
  return c;
}

}  // namespace moesim::runtime::reference
