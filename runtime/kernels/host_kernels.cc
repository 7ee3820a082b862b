#include "runtime/kernels/host_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/kernels/dispatch_layout.h"
#include "runtime/kernels/routing.h"
#include "sim/core/error.h"

namespace moesim::runtime {

int storage_bytes(Storage s) { return s == Storage::kF32 ? 4 : 2; }

const char* storage_name(Storage s) {
  switch (s) {
    case Storage::kF32: return "fp32";
    case Storage::kBf16: return "bf16";
    case Storage::kF16: return "fp16";
  }
  return "?";
}

float storage_to_float(const void* data, Storage type, std::int64_t index) {
  if (type == Storage::kF32) return static_cast<const float*>(data)[index];
  const std::uint16_t h = static_cast<const std::uint16_t*>(data)[index];
  if (type == Storage::kBf16) {
    const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
  }
  // IEEE binary16: sign, 5 exponent bits (bias 15), 10 mantissa bits.
  const int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float v;
  if (exponent == 0)
    v = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
  else if (exponent == 31)
    v = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  else
    v = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
  return sign ? -v : v;
}

namespace host {
namespace {

void require_f32(Storage s, const char* what) {
  if (s != Storage::kF32)
    throw InputError(std::string("the host emulation of ") + what + " stores fp32 only, got " + storage_name(s));
}

float* f(void* p) { return static_cast<float*>(p); }
const float* f(const void* p) { return static_cast<const float*>(p); }

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

float act_value(ActivationKind k, float x) {
  if (k == ActivationKind::kRelu) return x > 0 ? x : 0.0f;
  return static_cast<float>(0.5 * x * (1.0 + std::erf(x * kInvSqrt2)));
}

float act_derivative(ActivationKind k, float x) {
  if (k == ActivationKind::kRelu) return x > 0 ? 1.0f : 0.0f;
  return static_cast<float>(0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x));
}

float sigmoid(float x) { return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x)))); }

}  // namespace

void add(const AddArgs& a) {
  require_f32(a.type, "add");
  for (std::int64_t i = 0; i < a.count; ++i) f(a.dst)[i] += static_cast<const float*>(a.src)[i];
}

void fill(const FillArgs& a) {
  require_f32(a.type, "fill");
  std::uint64_t state = a.seed;
  for (std::int64_t i = 0; i < a.count; ++i) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    f(a.out)[i] = static_cast<float>((2.0 * u - 1.0) * a.scale);
  }
}

void route(const RouteArgs& a) {
  HostLanes lanes;
  for (std::int64_t t = 0; t < a.tokens; ++t)
    route_token(lanes, a.logits + t * a.experts, a.experts, a.top_k, a.normalize, a.probs + t * a.experts,
                a.topk_idx + t * a.top_k, a.topk_score + t * a.top_k);
}

void assign(const AssignArgs& a) {
  const std::int64_t rows = a.experts * a.capacity;
  std::fill(a.row_token, a.row_token + rows, -1);
  std::fill(a.row_choice, a.row_choice + rows, -1);
  std::vector<std::int32_t> count(a.experts, 0);
  for (int j = 0; j < a.top_k; ++j) {
    for (std::int64_t t = 0; t < a.tokens; ++t) {
      const int e = a.topk_idx[t * a.top_k + j];
      std::int32_t& out = a.topk_row[t * a.top_k + j];
      if (count[e] >= a.capacity) {
        out = -1;
        continue;
      }
      const auto row = dispatch_row(e, count[e]++, a.experts, a.capacity, a.chunks);
      out = static_cast<std::int32_t>(row);
      a.row_token[row] = static_cast<std::int32_t>(t);
      a.row_choice[row] = j;
    }
  }
  std::copy(count.begin(), count.end(), a.tokens_per_expert);
}

void encode(const EncodeArgs& a) {
  require_f32(a.type, "encode");
  for (std::int64_t r = a.row_begin; r < a.row_end; ++r) {
    float* out = f(a.out) + r * a.d_model;
    const std::int32_t t = a.row_token[r];
    if (t < 0)
      std::fill(out, out + a.d_model, 0.0f);
    else
      std::memcpy(out, f(a.x) + t * a.d_model, sizeof(float) * a.d_model);
  }
}

void activation(const ActivationArgs& a) {
  require_f32(a.type, "activation");
  const std::int64_t H = a.width;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    float* out = f(a.a) + r * H;
    if (a.act == ActivationKind::kSwiglu) {
      const float* h = f(a.h) + r * 2 * H;
      for (std::int64_t c = 0; c < H; ++c) out[c] = h[c] * sigmoid(h[c]) * h[H + c];
    } else {
      const float* h = f(a.h) + r * H;
      for (std::int64_t c = 0; c < H; ++c) out[c] = act_value(a.act, h[c]);
    }
  }
}

void activation_backward(const ActivationBackwardArgs& a) {
  require_f32(a.type, "activation backward");
  const std::int64_t H = a.width;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const float* da = f(a.da) + r * H;
    float* out_a = a.a != nullptr ? f(a.a) + r * H : nullptr;
    if (a.act == ActivationKind::kSwiglu) {
      const float* h = f(a.h) + r * 2 * H;
      float* dh = f(a.dh) + r * 2 * H;
      for (std::int64_t c = 0; c < H; ++c) {
        const float g = h[c], u = h[H + c], s = sigmoid(g), silu = g * s;
        const float d = da[c];
        dh[c] = d * u * s * (1.0f + g * (1.0f - s));
        dh[H + c] = d * silu;
        if (out_a != nullptr) out_a[c] = silu * u;
      }
    } else {
      const float* h = f(a.h) + r * H;
      float* dh = f(a.dh) + r * H;
      for (std::int64_t c = 0; c < H; ++c) {
        const float x = h[c];
        dh[c] = da[c] * act_derivative(a.act, x);  // da may alias dh: read before write
        if (out_a != nullptr) out_a[c] = act_value(a.act, x);
      }
    }
  }
}

// out_t = sum over kept j of (score_t,j or 1) * rows[topk_row_t,j]: decode and encode's backward.
void gather_rows(const float* rows, const std::int32_t* topk_row, const float* score, std::int64_t tokens, int k,
                 std::int64_t width, float* out) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    float* o = out + t * width;
    std::fill(o, o + width, 0.0f);
    for (int j = 0; j < k; ++j) {
      const std::int32_t row = topk_row[t * k + j];
      if (row < 0) continue;
      const float w = score != nullptr ? score[t * k + j] : 1.0f;
      const float* in = rows + row * width;
      for (std::int64_t c = 0; c < width; ++c) o[c] += w * in[c];
    }
  }
}

void decode(const DecodeArgs& a) {
  require_f32(a.type, "decode");
  gather_rows(f(a.expert_out), a.topk_row, a.topk_score, a.tokens, a.top_k, a.d_model, f(a.y));
}

void decode_backward(const DecodeBackwardArgs& a) {
  require_f32(a.type, "decode backward");
  const std::int64_t M = a.d_model;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    float* d = f(a.d_expert_out) + r * M;
    const std::int32_t t = a.row_token[r];
    if (t < 0) {
      std::fill(d, d + M, 0.0f);
      continue;
    }
    const float s = a.topk_score[t * a.top_k + a.row_choice[r]];
    const float* dy = f(a.dy) + t * M;
    for (std::int64_t c = 0; c < M; ++c) d[c] = s * dy[c];
  }
  for (std::int64_t t = 0; t < a.tokens; ++t) {
    for (int j = 0; j < a.top_k; ++j) {
      const std::int32_t row = a.topk_row[t * a.top_k + j];
      float ds = 0;
      if (row >= 0) {
        const float* dy = f(a.dy) + t * M;
        const float* o = f(a.expert_out) + row * M;
        for (std::int64_t c = 0; c < M; ++c) ds += dy[c] * o[c];
      }
      a.dscores[t * a.top_k + j] = ds;
    }
  }
}

void encode_backward(const EncodeBackwardArgs& a) {
  require_f32(a.type, "encode backward");
  gather_rows(f(a.d_dispatch), a.topk_row, nullptr, a.tokens, a.top_k, a.d_model, f(a.dx));
}

void route_backward(const RouteBackwardArgs& a) {
  require_f32(a.type, "route backward");
  const int E = a.experts, k = a.top_k;
  for (std::int64_t t = 0; t < a.tokens; ++t) {
    const float* p = a.probs + t * E;
    const std::int32_t* idx = a.topk_idx + t * k;
    const float* ds = a.dscores + t * k;
    const RouteGradTerms g = route_grad_terms(p, idx, a.topk_score + t * k, ds, k, a.normalize);
    float* out = f(a.dlogits) + t * E;
    for (int e = 0; e < E; ++e) out[e] = route_dlogit(e, p, idx, ds, k, a.normalize, g);
  }
}

void gemm(const GemmArgs& a) {
  require_f32(a.ab_type, "gemm");
  require_f32(a.c_type, "gemm");
  for (std::int64_t b = 0; b < a.batch; ++b) {
    const float* A = f(a.a) + b * a.stride_a;
    const float* B = f(a.b) + b * a.stride_b;
    float* C = f(a.c) + b * a.stride_c;
    for (std::int64_t i = 0; i < a.m; ++i) {
      for (std::int64_t j = 0; j < a.n; ++j) {
        float sum = 0;
        for (std::int64_t p = 0; p < a.k; ++p) {
          const float av = a.trans_a ? A[p * a.lda + i] : A[i * a.lda + p];
          const float bv = a.trans_b ? B[j * a.ldb + p] : B[p * a.ldb + j];
          sum += av * bv;
        }
        float& c = C[i * a.ldc + j];
        c = a.accumulate ? c + sum : sum;
      }
    }
  }
}

}  // namespace host
}  // namespace moesim::runtime
