// CPU reference of one MoE layer, forward and backward, in double precision (issue 6, item 3).
//
// The ground truth the GPU kernels are tested against, and itself tested in CI without a GPU
// (finite differences, expert-parallel and chunked equivalence). Notation of reference section 1:
// B tokens, M = d_model, H = d_ffn, F = FC1 width (H, or 2H for swiglu), E experts, top-k, C
// capacity per expert (per source rank).
//
// Forward, per token t (row x_t of x, B x M):
//   logits = x Wg                      Wg: M x E (replicated on every rank)
//   p_t    = softmax(logits_t)          max-subtracted
//   top-k  = the k largest p_t,e in descending order; a tie goes to the lower expert index
//   s_t,j  = p_t,e_j                    (kRaw: Switch / GShard-top-1 / MPipeMoE: the softmax prob)
//          = p_t,e_j / sum_i p_t,e_i    (kTopKNormalized: renormalised over the k choices, Mixtral)
//   slots  : choices are queued first by choice rank j (all first choices before any second
//            choice, GShard's priority), then in token order; the assignment (t, j) to expert e
//            takes the next free slot of e, and is dropped when e already holds C assignments.
//   D[e, slot] = x_t                    dispatch tensor [E, C, M], unused slots are zero
//   h = D W1_e (+ b1_e)                 FC1, per expert, F wide
//   a = act(h)                          relu, gelu (exact, erf form: PyTorch's default) or
//                                       swiglu: a = silu(h[:, :H]) * h[:, H:] (gate half first)
//   o = a W2_e (+ b2_e)                 FC2, H -> M
//   y_t = sum over kept choices j of s_t,j * o[e_j, slot_t,j]    (in j order; a dropped choice
//         adds nothing; a token whose choices are all dropped gets y_t = 0: the residual
//         connection lies outside the MoE layer)
// Biases are off by default: the simulator's memory accounting counts none (MPipeMoE Eq. 1).
// C comes from derive_layer_dims (sim/build/layer_dims.h): floor(k*f*B/E) rounded down to a
// multiple of the chunk count n; MoeLayerShape::from_specs copies it, so both engines agree.
//
// Backward, given dY (B x M):
//   ds_t,j = dY_t . o[e_j, slot]  (0 if dropped);  dO[e, slot] = s_t,j dY_t
//   dW2_e = a^T dO, db2_e = colsum dO;  dA = dO W2_e^T;  dH = dA * act'(h)
//   dW1_e = D^T dH, db1_e = colsum dH;  dD = dH W1_e^T;  dX_t = sum_j dD[e_j, slot_t,j]
//   dp (kRaw) = ds at the chosen experts; (kTopKNormalized) dp_e_j = (ds_j - sum_i ds_i s_i) / S
//   dlogits = p * (dp - sum_e dp_e p_e);  dWg = x^T dlogits;  dX += dlogits Wg^T
// The top-k choice and the dropping are piecewise constant: no gradient flows through them.
//
// Every product is a loop in a fixed order (rows outer, inner dimension ascending), so a row's
// output does not depend on which other rows share its GEMM: splitting experts over ranks or the
// capacity into chunks (expert_parallel.h) reproduces y, dX and dWg bit for bit; only the expert
// weight gradients (sums over rows, chunk by chunk) change association and agree up to double
// rounding.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/build/layer_dims.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/types.h"

namespace moesim::runtime::reference {

// Row-major dense matrix of doubles.
struct Matrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> values;

  Matrix() = default;
  Matrix(std::int64_t r, std::int64_t c);  // zero-filled
  double& at(std::int64_t r, std::int64_t c) { return values[static_cast<std::size_t>(r * cols + c)]; }
  double at(std::int64_t r, std::int64_t c) const { return values[static_cast<std::size_t>(r * cols + c)]; }
  double* row(std::int64_t r) { return values.data() + r * cols; }
  const double* row(std::int64_t r) const { return values.data() + r * cols; }
  bool operator==(const Matrix&) const = default;
};

// Uniform values in [-scale, scale) from a SplitMix64 stream: the same on every platform and
// compiler, so a GPU test and this reference draw identical inputs from a seed.
Matrix random_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed, double scale);

enum class ScoreNormalization { kRaw, kTopKNormalized };

struct MoeLayerShape {
  std::int64_t tokens = 0;    // B, per (source) rank
  std::int64_t d_model = 0;   // M
  std::int64_t d_ffn = 0;     // H
  // Hs: the shared experts' hidden width, all of them side by side as one FFN (count x d_ffn;
  // their outputs add up, so this is the same function); 0 without shared experts.
  std::int64_t shared_d_ffn = 0;
  int num_experts = 0;        // E
  int top_k = 1;              // k
  std::int64_t capacity = 0;  // C per expert per source rank
  Activation activation = Activation::kGelu;
  bool bias = false;
  ScoreNormalization scores = ScoreNormalization::kRaw;

  std::int64_t fc1_out() const { return activation == Activation::kSwiglu ? 2 * d_ffn : d_ffn; }
  std::int64_t shared_fc1_out() const { return activation == Activation::kSwiglu ? 2 * shared_d_ffn : shared_d_ffn; }
  std::int64_t dispatch_rows() const { return static_cast<std::int64_t>(num_experts) * capacity; }

  // The simulator's sizes: tokens, C and widths from `dims`, the activation from `model`.
  static MoeLayerShape from_specs(const ModelSpec& model, const LayerDims& dims);
  // Throws InputError when a size is not positive, k > E, or shapes do not fit.
  void validate() const;
};

// Parameters of the whole layer (all E experts). b1 / b2 are 1 x F / 1 x M, zero-width when the
// shape has no bias.
struct MoeLayerParams {
  Matrix gate;              // M x E
  std::vector<Matrix> w1;   // E of M x F
  std::vector<Matrix> b1;   // E of 1 x F
  std::vector<Matrix> w2;   // E of H x M
  std::vector<Matrix> b2;   // E of 1 x M
  Matrix shared_w1;         // M x Fs (0 x 0 without shared experts); no biases
  Matrix shared_w2;         // Hs x M
};

// Gate in [-1, 1) (well-separated routing), expert weights scaled by 1/sqrt(fan-in); the shared
// experts' W1 / W2 with seed + kSharedSeedOffset + 1 / + 2.
inline constexpr std::uint64_t kSharedSeedOffset = 999999937ULL;
MoeLayerParams random_params(const MoeLayerShape& shape, std::uint64_t seed);

struct Routing {
  Matrix logits;                        // B x E
  Matrix probs;                         // B x E, softmax
  std::vector<int> topk_idx;            // B x k, descending probability
  std::vector<double> topk_score;       // B x k, s_t,j
  std::vector<std::int64_t> slot;       // B x k, slot in the expert's capacity, -1 when dropped
  std::vector<std::int64_t> num_tokens_per_expert;  // E, kept assignments (<= C)
  std::int64_t num_dropped = 0;
  // Smallest gap p_(k) - p_(k+1) over tokens (infinity when k = E): a GPU test whose inputs have
  // a margin far above its dtype's rounding cannot pick different experts than this reference.
  double topk_margin = 0;
};

// With `forced_topk` (B x k expert indices, distinct per token), those experts are taken instead
// of this reference's own arg-max (probabilities, scores and the capacity assignment follow them;
// topk_margin stays that of the own choice): the choice of a device whose fp32 logits tie-break a
// near-tie differently.
// Throws InputError for a forced index out of range or repeated within a token.
Routing route(const MoeLayerShape& shape, const Matrix& gate, const Matrix& x,
              const std::vector<int>* forced_topk = nullptr);

struct MoeForward {
  Routing routing;
  Matrix dispatched;  // [E*C, M]: row e*C + slot
  Matrix preact;      // [E*C, F]: h
  Matrix act;         // [E*C, H]: a
  Matrix expert_out;  // [E*C, M]: o
  Matrix shared_h;    // B x Fs: the shared experts' FC1 output (0 x 0 without them)
  Matrix y;           // B x M: the routed experts' weighted outputs plus the shared experts'
};

MoeForward moe_forward(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x,
                       const std::vector<int>* forced_topk = nullptr);

struct MoeGradients {
  Matrix dx;               // B x M
  Matrix dgate;            // M x E
  std::vector<Matrix> dw1, db1, dw2, db2;  // per expert, shaped as the parameters
  Matrix dshared_w1, dshared_w2;           // shaped as the shared experts' parameters
  Matrix dlogits;          // B x E (for stage-by-stage GPU comparison)
  std::vector<double> dscores;  // B x k
};

MoeGradients moe_backward(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x,
                          const MoeForward& forward, const Matrix& dy);

// Gradients of every parameter, all zero (dx, dlogits and dscores empty).
MoeGradients zero_gradients(const MoeLayerShape& shape);
// Backward of one batch: sets g.dx, g.dlogits and g.dscores, adds to dWg and the expert gradients
// (rows in slot order), so that several batches (source ranks) accumulate into one set.
void backward_accumulate(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x,
                         const MoeForward& forward, const Matrix& dy, MoeGradients& g);

// Building blocks shared with the expert-parallel and chunked execution (expert_parallel.h), so
// that every path computes each row with the very same loops.
namespace detail {
// h = in W1_e (+ b1_e): FC1 alone, as a recomputation (strategies s3/s4) runs it.
Matrix fc1_rows(const MoeLayerParams& params, int expert, const Matrix& in);
// o rows = act(in rows W1_e + b1_e) W2_e + b2_e; writes h and a too. in: rows x M.
void expert_forward_rows(const MoeLayerShape& shape, const MoeLayerParams& params, int expert,
                         const Matrix& in, Matrix& h, Matrix& a, Matrix& out);
// a = act(h), row by row.
void activation_forward(const MoeLayerShape& shape, const Matrix& h, Matrix& a);
// Backward of one expert over `in` rows (its dispatched input) and `h` (its FC1 output): adds to
// dW/db, returns dIn (rows x M).
Matrix expert_backward_rows(const MoeLayerShape& shape, const MoeLayerParams& params, int expert,
                            const Matrix& in, const Matrix& h, const Matrix& dout, Matrix& dw1,
                            Matrix& db1, Matrix& dw2, Matrix& db2);
// The shared experts over all B tokens as one expert of width Hs: y += out; h saved.
void shared_forward(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x, Matrix& h,
                    Matrix& y);
// Their backward: adds to g.dshared_w1 / w2 and returns their part of dX.
Matrix shared_backward(const MoeLayerShape& shape, const MoeLayerParams& params, const Matrix& x, const Matrix& h,
                       const Matrix& dy, MoeGradients& g);
// y from the expert outputs at [E*C, M] rows and the routing.
Matrix decode(const MoeLayerShape& shape, const Routing& routing, const Matrix& expert_out);
// dO at [E*C, M] rows and ds (B x k) from dY.
void decode_backward(const MoeLayerShape& shape, const Routing& routing, const Matrix& expert_out,
                     const Matrix& dy, Matrix& dout, std::vector<double>& dscores);
// Adds the encode's backward (gather of dD rows) and the router's to dx; returns dlogits and adds
// x^T dlogits to dgate.
Matrix router_and_encode_backward(const MoeLayerShape& shape, const MoeLayerParams& params,
                                  const Matrix& x, const Routing& routing,
                                  const std::vector<double>& dscores, const Matrix& ddispatched,
                                  Matrix& dx, Matrix& dgate);
}  // namespace detail

// How close a GPU result must be to this reference: max |got - want| <= rel * max |want| over a
// tensor (normwise, so tiny entries of a large tensor are judged at the tensor's scale).
struct Tolerance {
  double forward_rel = 0;   // y and the stage outputs
  double gradient_rel = 0;  // dX, dWg and the expert gradients (longer accumulation chains)
};
// Intended per math dtype of the GEMMs: fp32 1e-5 / 1e-4, tf32 5e-3 / 1e-2, bf16 3e-2 / 5e-2,
// fp16 5e-3 / 1e-2 (unit roundoff 6e-8, 5e-4, 4e-3, 5e-4 times the inner dimensions in use).
Tolerance tolerance_for(DType gemm_dtype);

struct Comparison {
  double max_abs_error = 0;
  double max_abs_reference = 0;
  double relative() const;  // max_abs_error / max_abs_reference (0 when both are 0)
};
// Throws InputError on a shape mismatch.
Comparison compare(const Matrix& got, const Matrix& want);

}  // namespace moesim::runtime::reference
