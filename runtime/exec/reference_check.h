// Checks an executor's results against the CPU reference (runtime/reference), tensor by tensor,
// with the tolerance table of docs/runtime.md (reference::tolerance_for the GEMM math dtype).
//
// The reference is computed from the values the devices actually hold (downloaded after
// rounding to the storage type), so only the arithmetic is compared. Routing: the reference takes
// the experts the devices chose (so the outputs compare like with like); a token's choice is a
// routing error unless, at every position where it differs from the reference's own, the two
// experts' reference probabilities are within kAmbiguousMargin (a near-tie the fp32 logits may
// break either way: counted in ambiguous_tokens); an invalid choice (an index out of range or
// repeated) is an error too. The dispatch rows must equal the reference's capacity assignment
// of the experts taken, exactly.
// Near-ties are common where the layer's input is small, e.g. deep in a stack of MoE layers
// without the residual connections and normalisation a real model has between them.
#pragma once

#include <string>
#include <vector>

#include "runtime/exec/layer_executor.h"
#include "runtime/reference/moe_reference.h"

namespace moesim::runtime {

// Probability gap below which two experts tie up to the rounding of fp32 logits (a few units of
// 1e-7 relative at the logit scales of the checks).
inline constexpr double kAmbiguousMargin = 1e-6;

struct CheckEntry {
  std::string tensor;  // "y@0", "dx@1", "dgate", "dw1[e3]", "routing@0", ...
  double relative = 0;  // max |got - want| / max |want|; for routing the count of mismatches
  double tolerance = 0;
  bool ok() const { return relative <= tolerance; }
};

struct CheckReport {
  std::vector<CheckEntry> entries;
  double topk_margin = 0;  // the reference's smallest gap p_(k) - p_(k+1) over every rank's tokens
  std::int64_t ambiguous_tokens = 0;  // tokens routed unlike the reference at a near-tie
  bool ok() const;
  double worst_ratio() const;  // max relative / tolerance
};

// One rank's top-k choices against the reference's own routing of the same tokens.
struct RoutingJudgement {
  std::vector<int> forced;     // B x k: the device's choice where valid, else the reference's
  std::int64_t errors = 0;     // tokens chosen invalidly or unlike the reference beyond a near-tie
  std::int64_t ambiguous = 0;  // tokens chosen differently at near-ties only
};
// `logit_bound` (tokens x experts, optional): a bound on how far the device's logit may lie from
// the reference's (logit_error_bounds). Two experts also tie when their log-probabilities differ
// by no more than the sum of their bounds: softmax keeps the logits' order, so rounding within
// the bounds can swap them.
RoutingJudgement judge_routing(const reference::Routing& own, const std::vector<std::int32_t>& device_topk,
                               std::int64_t tokens, int top_k, int num_experts,
                               const reference::Matrix* logit_bound = nullptr);

// Per (token, expert): a bound on |device logit - exact logit| for the gate GEMM x (B x M) times
// gate (M x E) in the math of `gemm_dtype`: each operand rounded to the math type (tf32 taken as
// truncated, 2^-10 per operand, since the tensor cores may truncate; bf16 2^-8, fp16 2^-11, fp32
// exact) plus fp32 accumulation over M products (M x 2^-24), times sum_k |x_tk| |w_ke|. On an
// H200 a TF32 gate broke a near-tie of 3.7e-5 in probability, far beyond kAmbiguousMargin.
reference::Matrix logit_error_bounds(const reference::Matrix& x, const reference::Matrix& gate, DType gemm_dtype);

// Every rank of the layer must be local to `executor`. Throws InputError otherwise. With several
// layers each is checked from its own inputs as the devices hold them (its x is the layer below's
// output, its dY the layer above's input gradient), entries named "L<l>.<tensor>".
CheckReport check_against_reference(const LayerExecutor& executor, const ModelSpec& model, const LayerDims& dims,
                                    bool normalize_scores = false);
// Adds one layer's report to `report` (entries prefixed "L<layer>." when num_layers > 1; the
// margin is the smallest of the layers'). Layers are appended in order, starting with 0.
void append_layer(CheckReport& report, const CheckReport& layer_report, int layer, int num_layers);
// The same from values already downloaded: got[r] is rank r's (every rank of the layer; a run
// with one process per rank gathers them at rank 0).
CheckReport check_against_reference(const std::vector<RankValues>& got, const ModelSpec& model, const LayerDims& dims,
                                    bool normalize_scores = false);

}  // namespace moesim::runtime
