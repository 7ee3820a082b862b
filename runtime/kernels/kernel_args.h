// Arguments of the MoE layer's kernels: raw pointers, sizes and the storage type, no ownership
// (design.md lesson 10). Shared by the CUDA kernels (moe_kernels.cu) and their host versions
// (host_kernels.cc), which are the executable specification the executor is tested with on
// machines without a GPU; kept C++17- and CUDA-free so both compilers read it.
//
// Conventions (docs/runtime.md, table "conventions"): softmax over all E experts, max-subtracted,
// in fp32; top-k in descending probability, a tie to the lower expert index; scores are the raw
// probability unless `normalize`; capacity assignment queues all first choices (token order),
// then all second choices, ...; an assignment to a full expert is dropped.
//
// Row layout of the source-side dispatch tensor (and of T_O, dT_O): chunk-major, see
// dispatch_layout.h. Expert-side chunk buffers (T_DI, T_M, T_DO, dDO, dM, dDI) hold the rows of
// local expert el contiguously: [E_l][R * C/n][width].
#pragma once

#include <cstdint>

namespace moesim::runtime {

// Element type of stored tensors. Math is fp32 everywhere outside cuBLAS.
enum class Storage { kF32 = 0, kBf16 = 1, kF16 = 2 };
int storage_bytes(Storage s);
const char* storage_name(Storage s);
// Element `index` of an array of `type` as fp32 (bf16 and fp16 widen exactly).
float storage_to_float(const void* data, Storage type, std::int64_t index);

enum class ActivationKind { kRelu = 0, kGelu = 1, kSwiglu = 2 };

// Uniform values in [-scale, scale) from SplitMix64, element i = the (i+1)-th output of a stream
// seeded with `seed`: exactly reference::random_matrix's values, rounded to the storage type.
struct FillArgs {
  void* out = nullptr;
  std::int64_t count = 0;
  std::uint64_t seed = 0;
  double scale = 1.0;
  Storage type = Storage::kF32;
};

// dst += src, elementwise in fp32, rounded to the storage type: the shared experts' output into
// y, their input gradient into dX.
struct AddArgs {
  void* dst = nullptr;
  const void* src = nullptr;
  std::int64_t count = 0;
  Storage type = Storage::kF32;
};

// Per token: probs = softmax(logits), the top-k experts and their scores.
struct RouteArgs {
  const float* logits = nullptr;  // B x E
  std::int64_t tokens = 0;
  int experts = 0;
  int top_k = 1;
  bool normalize = false;         // scores / sum of the k chosen probabilities
  float* probs = nullptr;         // B x E
  std::int32_t* topk_idx = nullptr;  // B x k
  float* topk_score = nullptr;    // B x k
};

// Capacity assignment (deterministic): slot of choice (t, j) at expert e = the number of earlier
// assignments to e in the order (j, t); kept when slot < capacity.
struct AssignArgs {
  const std::int32_t* topk_idx = nullptr;  // B x k
  std::int64_t tokens = 0;
  int experts = 0;
  int top_k = 1;
  std::int64_t capacity = 0;  // C
  int chunks = 1;             // n (divides C)
  std::int32_t* topk_row = nullptr;    // B x k: row of the dispatch tensor, -1 when dropped
  std::int32_t* row_token = nullptr;   // E*C: the token in that row, -1 when the slot is unused
  std::int32_t* row_choice = nullptr;  // E*C: j of the assignment in that row, -1 when unused
  std::int32_t* tokens_per_expert = nullptr;  // E: kept assignments
  // Working memory of the device's algorithm (DeviceOps::assign_scratch_bytes; the GPU sorts the
  // choices), reserved by the executor up front (the host emulation reserves it too, unused, so
  // that its race detector checks how the executor shares it).
  void* scratch = nullptr;
  std::int64_t scratch_bytes = 0;
};

// out rows [row_begin, row_end) = x[row_token] (zero for unused rows). out points at row 0.
struct EncodeArgs {
  const void* x = nullptr;  // B x M
  const std::int32_t* row_token = nullptr;
  std::int64_t d_model = 0;
  std::int64_t row_begin = 0;
  std::int64_t row_end = 0;
  void* out = nullptr;
  Storage type = Storage::kF32;
};

// a = act(h). relu / gelu: h is rows x H; swiglu: h is rows x 2H, a = silu(h[:, :H]) * h[:, H:].
struct ActivationArgs {
  ActivationKind act = ActivationKind::kGelu;
  std::int64_t rows = 0;
  std::int64_t width = 0;  // H
  const void* h = nullptr;
  void* a = nullptr;       // rows x H
  Storage type = Storage::kF32;
};

// dh = da * act'(h) (swiglu: both halves of dh, rows x 2H). For relu / gelu dh may equal da (in
// place). When `a` is not null, a = act(h) is written too (the input of FC2's weight gradient).
struct ActivationBackwardArgs {
  ActivationKind act = ActivationKind::kGelu;
  std::int64_t rows = 0;
  std::int64_t width = 0;  // H
  const void* h = nullptr;
  const void* da = nullptr;  // rows x H
  void* dh = nullptr;        // rows x H (relu, gelu) or rows x 2H (swiglu)
  void* a = nullptr;         // optional, rows x H
  Storage type = Storage::kF32;
};

// y_t = sum over kept j of score_t,j * expert_out[topk_row_t,j] (in j order; 0 when all dropped).
struct DecodeArgs {
  const void* expert_out = nullptr;  // dispatch rows x M
  const std::int32_t* topk_row = nullptr;
  const float* topk_score = nullptr;
  std::int64_t tokens = 0;
  int top_k = 1;
  std::int64_t d_model = 0;
  void* y = nullptr;  // B x M
  Storage type = Storage::kF32;
};

// d_expert_out[row] = score * dy[token] for used rows, 0 otherwise (every row written);
// dscores_t,j = dy_t . expert_out[topk_row_t,j] (0 when dropped).
struct DecodeBackwardArgs {
  const void* dy = nullptr;          // B x M
  const void* expert_out = nullptr;  // rows x M
  const std::int32_t* topk_row = nullptr;
  const float* topk_score = nullptr;
  const std::int32_t* row_token = nullptr;
  const std::int32_t* row_choice = nullptr;
  std::int64_t tokens = 0;
  int top_k = 1;
  std::int64_t rows = 0;  // E*C
  std::int64_t d_model = 0;
  void* d_expert_out = nullptr;  // rows x M
  float* dscores = nullptr;      // B x k
  Storage type = Storage::kF32;
};

// dx_t = sum over kept j of d_dispatch[topk_row_t,j] (overwrites dx).
struct EncodeBackwardArgs {
  const void* d_dispatch = nullptr;  // rows x M
  const std::int32_t* topk_row = nullptr;
  std::int64_t tokens = 0;
  int top_k = 1;
  std::int64_t d_model = 0;
  void* dx = nullptr;  // B x M
  Storage type = Storage::kF32;
};

// dlogits = p * (dp - sum_e dp_e p_e), dp = dscores at the chosen experts (renormalised:
// dp_e_j = (ds_j - sum_i ds_i s_i) / S), stored in the storage type for the gate's GEMMs.
struct RouteBackwardArgs {
  const float* probs = nullptr;
  const std::int32_t* topk_idx = nullptr;
  const float* topk_score = nullptr;
  const float* dscores = nullptr;
  std::int64_t tokens = 0;
  int experts = 0;
  int top_k = 1;
  bool normalize = false;
  void* dlogits = nullptr;  // B x E
  Storage type = Storage::kF32;
};

}  // namespace moesim::runtime
