// The CPU reference layer: routing rules pinned on hand-solved cases, capacity taken from the
// simulator's derive_layer_dims, and every gradient checked against central finite differences
// for each activation, top-1 and top-2, with and without dropping, bias and score normalisation.
#include "runtime/reference/moe_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "sim/core/error.h"
#include "sim/build/moe_graph.h"
#include "sim/spec/hardware_spec.h"

namespace moesim::runtime::reference {
namespace {

// Gate = identity (M = E), so each row of x is its token's logits.
MoeLayerShape identity_gate_shape() {
  MoeLayerShape s;
  s.tokens = 3;
  s.d_model = 4;
  s.d_ffn = 2;
  s.num_experts = 4;
  s.top_k = 2;
  s.capacity = 1;
  s.activation = Activation::kRelu;
  return s;
}

Matrix identity(std::int64_t n) {
  Matrix m(n, n);
  for (std::int64_t i = 0; i < n; ++i) m.at(i, i) = 1;
  return m;
}

Matrix rows(const std::vector<std::vector<double>>& v) {
  Matrix m(static_cast<std::int64_t>(v.size()), static_cast<std::int64_t>(v[0].size()));
  for (std::size_t r = 0; r < v.size(); ++r)
    for (std::size_t c = 0; c < v[r].size(); ++c) m.at(static_cast<std::int64_t>(r), static_cast<std::int64_t>(c)) = v[r][c];
  return m;
}

TEST(Routing, TiesGoToTheLowerExpertAndFirstChoicesFillCapacityFirst) {
  const MoeLayerShape s = identity_gate_shape();
  // t0 picks (0, 1); t1 ties experts 1 and 2 and takes 1 first; t2 picks (3, 0).
  const Matrix x = rows({{2, 1, 0, 0}, {0, 3, 3, 0}, {1, 0, 0, 2}});
  const Routing r = route(s, identity(4), x);
  EXPECT_EQ(r.topk_idx, (std::vector<int>{0, 1, 1, 2, 3, 0}));
  // C = 1. First choices in token order: t0 -> e0, t1 -> e1, t2 -> e3. Then second choices:
  // t0 -> e1 (full, dropped), t1 -> e2, t2 -> e0 (full, dropped). Token-major order would have
  // given t0's second choice the slot of e1 instead of t1's first.
  EXPECT_EQ(r.slot, (std::vector<std::int64_t>{0, -1, 0, 0, 0, -1}));
  EXPECT_EQ(r.num_tokens_per_expert, (std::vector<std::int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(r.num_dropped, 2);
  // A tie inside the top-k is harmless; the margin is between the k-th pick and the best
  // unpicked expert: for t1, p(e2) - p(e0).
  const double e3 = std::exp(3.0);
  const double p_hi = e3 / (2 * e3 + 2), p_lo = 1 / (2 * e3 + 2);
  EXPECT_NEAR(r.probs.at(1, 2), p_hi, 1e-15);
  EXPECT_LE(r.topk_margin, p_hi - p_lo + 1e-15);
}

TEST(Routing, ScoresAreRawProbabilitiesOrRenormalisedOverTopK) {
  MoeLayerShape s = identity_gate_shape();
  const Matrix x = rows({{2, 1, 0, 0}, {0, 3, 3, 0}, {1, 0, 0, 2}});
  const Routing raw = route(s, identity(4), x);
  EXPECT_DOUBLE_EQ(raw.topk_score[0], raw.probs.at(0, 0));
  EXPECT_DOUBLE_EQ(raw.topk_score[1], raw.probs.at(0, 1));
  s.scores = ScoreNormalization::kTopKNormalized;
  const Routing norm = route(s, identity(4), x);
  const double sum = raw.probs.at(0, 0) + raw.probs.at(0, 1);
  EXPECT_DOUBLE_EQ(norm.topk_score[0], raw.probs.at(0, 0) / sum);
  EXPECT_DOUBLE_EQ(norm.topk_score[1], raw.probs.at(0, 1) / sum);
  EXPECT_DOUBLE_EQ(norm.topk_score[2], 0.5);  // the exact tie of t1
}

// A forced choice replaces the arg-max; probabilities and the margin stay the reference's own, the
// scores and the capacity assignment follow the forced experts.
TEST(Routing, AForcedChoiceIsTakenAndMarkedWhereItDiffers) {
  MoeLayerShape s = identity_gate_shape();
  s.scores = ScoreNormalization::kTopKNormalized;
  const Matrix x = rows({{2, 1, 0, 0}, {0, 3, 3, 0}, {1, 0, 0, 2}});
  const Routing own = route(s, identity(4), x);
  const Routing same = route(s, identity(4), x, &own.topk_idx);
  EXPECT_EQ(same.topk_idx, own.topk_idx);
  EXPECT_EQ(same.slot, own.slot);
  // t1 takes the tie the other way (2 before 1) and t2 takes expert 2 instead of 0.
  const std::vector<int> forced{0, 1, 2, 1, 3, 2};
  const Routing r = route(s, identity(4), x, &forced);
  EXPECT_EQ(r.topk_idx, forced);
  EXPECT_EQ(r.topk_margin, own.topk_margin);
  // C = 1, first choices first: t0 -> e0, t1 -> e2, t2 -> e3; second: t0 -> e1, t1 -> e1 (full),
  // t2 -> e2 (full).
  EXPECT_EQ(r.slot, (std::vector<std::int64_t>{0, 0, 0, -1, 0, -1}));
  const double sum = r.probs.at(2, 3) + r.probs.at(2, 2);
  EXPECT_DOUBLE_EQ(r.topk_score[5], r.probs.at(2, 2) / sum);
  const std::vector<int> repeated{0, 0, 1, 2, 3, 0};
  EXPECT_THROW(route(s, identity(4), x, &repeated), InputError);
  const std::vector<int> out_of_range{0, 4, 1, 2, 3, 0};
  EXPECT_THROW(route(s, identity(4), x, &out_of_range), InputError);
  const std::vector<int> short_list{0, 1};
  EXPECT_THROW(route(s, identity(4), x, &short_list), InputError);
}

TEST(Forward, DecodeWeighsKeptExpertRowsByScoreAndSkipsDropped) {
  const MoeLayerShape s = identity_gate_shape();
  const Matrix x = rows({{2, 1, 0, 0}, {0, 3, 3, 0}, {1, 0, 0, 2}});
  MoeLayerParams p = random_params(s, 7);
  p.gate = identity(4);
  const MoeForward f = moe_forward(s, p, x);
  const std::int64_t C = s.capacity;
  for (std::int64_t m = 0; m < s.d_model; ++m) {
    // t0 kept only its first choice (e0, slot 0).
    EXPECT_DOUBLE_EQ(f.y.at(0, m), f.routing.topk_score[0] * f.expert_out.at(0 * C + 0, m));
    // t1 kept both (e1 slot 0, e2 slot 0), summed in choice order.
    EXPECT_DOUBLE_EQ(f.y.at(1, m), f.routing.topk_score[2] * f.expert_out.at(1 * C, m) +
                                       f.routing.topk_score[3] * f.expert_out.at(2 * C, m));
  }
  // The dispatch tensor holds the token in its slot and zeros where nothing was routed.
  for (std::int64_t m = 0; m < s.d_model; ++m) {
    EXPECT_EQ(f.dispatched.at(3 * C, m), x.at(2, m));
    EXPECT_EQ(f.dispatched.at(2 * C, m), x.at(1, m));
  }
}

TEST(Shape, CapacityIsTheSimulatorsFloor) {
  ModelSpec model;
  model.d_model = 8;
  model.d_ffn = 16;
  model.num_experts = 4;
  model.top_k = 2;
  model.capacity_factor = 1.25;
  model.activation = Activation::kSwiglu;
  ClusterSpec cluster;
  cluster.node.gpus_per_node = 1;
  cluster.num_nodes = 1;
  RunSpec run;
  run.tokens_per_gpu = 10;
  run.num_chunks = 4;
  // floor(2 * 1.25 * 10 / 4) = floor(6.25) = 6, whatever n (the chunks split it, 2 + 2 + 1 + 1).
  const MoeLayerShape s = MoeLayerShape::from_specs(model, derive_layer_dims(model, cluster, run));
  EXPECT_EQ(s.capacity, 6);
  EXPECT_EQ(s.fc1_out(), 32);
  EXPECT_EQ(s.activation, Activation::kSwiglu);
  EXPECT_FALSE(s.bias);  // the simulator counts no biases
}

TEST(Shape, RejectsTopKAboveExperts) {
  MoeLayerShape s = identity_gate_shape();
  s.top_k = 5;
  EXPECT_THROW(s.validate(), InputError);
}

TEST(Tolerance, TighterForWiderMantissasAndLooserForGradients) {
  for (DType d : {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16}) {
    const Tolerance t = tolerance_for(d);
    EXPECT_GT(t.forward_rel, 0);
    EXPECT_GE(t.gradient_rel, t.forward_rel);
  }
  EXPECT_LT(tolerance_for(DType::kFp32).forward_rel, tolerance_for(DType::kTf32).forward_rel);
  EXPECT_LT(tolerance_for(DType::kFp16).forward_rel, tolerance_for(DType::kBf16).forward_rel);
}

TEST(Compare, IsNormwiseOverTheTensor) {
  const Matrix want = rows({{10, 0.001}});
  const Matrix got = rows({{10, 0.002}});
  const Comparison c = compare(got, want);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 0.001);
  EXPECT_DOUBLE_EQ(c.relative(), 0.0001);
  EXPECT_THROW(compare(rows({{1, 2, 3}}), want), InputError);
}

// --- Finite differences -------------------------------------------------------------------------

struct GradCase {
  Activation activation;
  int top_k;
  bool dropping;
  bool bias;
  ScoreNormalization scores;
};

std::string name_of(const ::testing::TestParamInfo<GradCase>& info) {
  const GradCase& c = info.param;
  return std::string(to_string(c.activation)) + "_top" + std::to_string(c.top_k) +
         (c.dropping ? "_drop" : "_nodrop") + (c.bias ? "_bias" : "_nobias") +
         (c.scores == ScoreNormalization::kRaw ? "_raw" : "_renorm");
}

class GradientCheck : public ::testing::TestWithParam<GradCase> {};

double loss(const MoeLayerShape& s, const MoeLayerParams& p, const Matrix& x, const Matrix& g,
            const Routing& expected) {
  const MoeForward f = moe_forward(s, p, x);
  // A perturbation that changed a top-k pick or a slot would make the difference meaningless.
  EXPECT_EQ(f.routing.topk_idx, expected.topk_idx);
  EXPECT_EQ(f.routing.slot, expected.slot);
  double l = 0;
  for (std::size_t i = 0; i < g.values.size(); ++i) l += f.y.values[i] * g.values[i];
  return l;
}

// Central differences of L = sum(y * G) over every entry of `value`, against `analytic`.
void check(const std::string& what, double& value, double analytic, const std::function<double()>& eval) {
  constexpr double kStep = 1e-5;
  const double saved = value;
  value = saved + kStep;
  const double up = eval();
  value = saved - kStep;
  const double down = eval();
  value = saved;
  const double numeric = (up - down) / (2 * kStep);
  EXPECT_NEAR(analytic, numeric, 1e-7 * std::max(1.0, std::abs(numeric))) << what;
}

TEST_P(GradientCheck, EveryGradientMatchesCentralDifferences) {
  const GradCase c = GetParam();
  MoeLayerShape s;
  s.tokens = 6;
  s.d_model = 4;
  s.d_ffn = 3;
  s.num_experts = 4;
  s.top_k = c.top_k;
  // Without dropping every expert can take every token; with it, 1 slot per expert for 6*k picks.
  s.capacity = c.dropping ? 1 : s.tokens;
  s.activation = c.activation;
  s.bias = c.bias;
  s.scores = c.scores;
  s.shared_d_ffn = 2;  // a shared expert too (its parameters do not change the routed ones' draws)
  MoeLayerParams p = random_params(s, 11);
  Matrix x = random_matrix(s.tokens, s.d_model, 12, 1.0);
  const Matrix g = random_matrix(s.tokens, s.d_model, 13, 1.0);

  const MoeForward f = moe_forward(s, p, x);
  ASSERT_GT(f.routing.topk_margin, 1e-3) << "inputs too close to a routing tie for differences";
  if (c.dropping) {
    ASSERT_GT(f.routing.num_dropped, 0);
  } else {
    ASSERT_EQ(f.routing.num_dropped, 0);
  }
  const MoeGradients grad = moe_backward(s, p, x, f, g);
  const auto eval = [&] { return loss(s, p, x, g, f.routing); };

  for (std::size_t i = 0; i < x.values.size(); ++i) check("dx[" + std::to_string(i) + "]", x.values[i], grad.dx.values[i], eval);
  for (std::size_t i = 0; i < p.gate.values.size(); ++i)
    check("dgate[" + std::to_string(i) + "]", p.gate.values[i], grad.dgate.values[i], eval);
  for (std::size_t e = 0; e < p.w1.size(); ++e) {
    const std::string ex = "[e" + std::to_string(e) + "][";
    for (std::size_t i = 0; i < p.w1[e].values.size(); ++i)
      check("dw1" + ex + std::to_string(i) + "]", p.w1[e].values[i], grad.dw1[e].values[i], eval);
    for (std::size_t i = 0; i < p.w2[e].values.size(); ++i)
      check("dw2" + ex + std::to_string(i) + "]", p.w2[e].values[i], grad.dw2[e].values[i], eval);
    ASSERT_EQ(p.b1[e].values.size(), grad.db1[e].values.size());
    for (std::size_t i = 0; i < p.b1[e].values.size(); ++i)
      check("db1" + ex + std::to_string(i) + "]", p.b1[e].values[i], grad.db1[e].values[i], eval);
    for (std::size_t i = 0; i < p.b2[e].values.size(); ++i)
      check("db2" + ex + std::to_string(i) + "]", p.b2[e].values[i], grad.db2[e].values[i], eval);
  }
  ASSERT_EQ(p.shared_w1.values.size(), grad.dshared_w1.values.size());
  ASSERT_EQ(p.shared_w2.values.size(), grad.dshared_w2.values.size());
  for (std::size_t i = 0; i < p.shared_w1.values.size(); ++i)
    check("dshared_w1[" + std::to_string(i) + "]", p.shared_w1.values[i], grad.dshared_w1.values[i], eval);
  for (std::size_t i = 0; i < p.shared_w2.values.size(); ++i)
    check("dshared_w2[" + std::to_string(i) + "]", p.shared_w2.values[i], grad.dshared_w2.values[i], eval);
  // The router gradient is really exercised: with raw scores or top-2 renormalisation it is not 0.
  double gate_norm = 0;
  for (double v : grad.dgate.values) gate_norm += std::abs(v);
  if (c.scores == ScoreNormalization::kRaw || c.top_k > 1) {
    EXPECT_GT(gate_norm, 1e-3);
  } else {
    EXPECT_EQ(gate_norm, 0.0);  // top-1 renormalised: s = 1, the router gets no gradient
  }
}

std::vector<GradCase> all_cases() {
  std::vector<GradCase> out;
  for (Activation a : {Activation::kRelu, Activation::kGelu, Activation::kSwiglu})
    for (int k : {1, 2})
      for (bool drop : {false, true})
        for (bool bias : {false, true})
          for (ScoreNormalization n : {ScoreNormalization::kRaw, ScoreNormalization::kTopKNormalized})
            out.push_back(GradCase{a, k, drop, bias, n});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, GradientCheck, ::testing::ValuesIn(all_cases()), name_of);

}  // namespace
}  // namespace moesim::runtime::reference
