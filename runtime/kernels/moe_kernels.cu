#include "runtime/kernels/moe_kernels.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "runtime/kernels/dispatch_layout.h"
#include "sim/core/error.h"

namespace moesim::runtime::cuda {

namespace {

template <typename T> __device__ __forceinline__ float load(const T* p, long long i);
template <> __device__ __forceinline__ float load(const float* p, long long i) { return p[i]; }
template <> __device__ __forceinline__ float load(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
template <> __device__ __forceinline__ float load(const __half* p, long long i) { return __half2float(p[i]); }

template <typename T> __device__ __forceinline__ void store(T* p, long long i, float v);
template <> __device__ __forceinline__ void store(float* p, long long i, float v) { p[i] = v; }
template <> __device__ __forceinline__ void store(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }
template <> __device__ __forceinline__ void store(__half* p, long long i, float v) { p[i] = __float2half(v); }

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw InternalError(std::string("CUDA kernel launch failed (") + what + "): " + cudaGetErrorString(err));
}

// Calls f.template operator()<T>() for the storage type.
template <typename F>
void by_type(Storage s, F&& f) {
  switch (s) {
    case Storage::kF32: f(static_cast<float*>(nullptr)); return;
    case Storage::kBf16: f(static_cast<__nv_bfloat16*>(nullptr)); return;
    case Storage::kF16: f(static_cast<__half*>(nullptr)); return;
  }
}

unsigned blocks_for(long long n, int threads) {
  const long long b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535LL * 32 ? (b > 0 ? b : 1) : 65535LL * 32);
}

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

__device__ __forceinline__ float act_value(ActivationKind k, float x) {
  if (k == ActivationKind::kRelu) return x > 0.f ? x : 0.f;
  return 0.5f * x * (1.f + erff(x * static_cast<float>(kInvSqrt2)));
}

__device__ __forceinline__ float act_derivative(ActivationKind k, float x) {
  if (k == ActivationKind::kRelu) return x > 0.f ? 1.f : 0.f;
  return 0.5f * (1.f + erff(x * static_cast<float>(kInvSqrt2))) +
         x * static_cast<float>(kInvSqrt2Pi) * expf(-0.5f * x * x);
}

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

template <typename T>
__global__ void add_kernel(T* dst, const T* src, long long count) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    store(dst, i, load(dst, i) + load(src, i));
}

template <typename T>
__global__ void fill_kernel(T* out, long long count, unsigned long long seed, double scale) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    // The (i+1)-th output of SplitMix64 seeded with `seed` (reference::random_matrix).
    unsigned long long z = seed + static_cast<unsigned long long>(i + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    store(out, i, static_cast<float>((2.0 * u - 1.0) * scale));
  }
}

// One thread per token: E is at most a few hundred, and the scan keeps the tie-break explicit.
__global__ void route_kernel(RouteArgs a) {
  const long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (t >= a.tokens) return;
  const int E = a.experts;
  const float* l = a.logits + t * E;
  float* p = a.probs + t * E;
  float mx = l[0];
  for (int e = 1; e < E; ++e) mx = fmaxf(mx, l[e]);
  float sum = 0.f;
  for (int e = 0; e < E; ++e) sum += (p[e] = expf(l[e] - mx));
  for (int e = 0; e < E; ++e) p[e] /= sum;
  int chosen[kMaxTopK];
  float total = 0.f;
  for (int j = 0; j < a.top_k; ++j) {
    int best = -1;
    for (int e = 0; e < E; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || chosen[i] == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = e;  // strict: a tie keeps the lower index
    }
    chosen[j] = best;
    a.topk_idx[t * a.top_k + j] = best;
    a.topk_score[t * a.top_k + j] = p[best];
    total += p[best];
  }
  if (a.normalize)
    for (int j = 0; j < a.top_k; ++j) a.topk_score[t * a.top_k + j] /= total;
}

constexpr int kAssignThreads = 256;
constexpr int kAssignWarps = kAssignThreads / 32;

// Tiles of 256 tokens per choice rank j: within a warp, a token's rank among equal experts comes
// from __match_any_sync; warps are ordered by an exclusive scan of per-warp counts per expert; tiles
// and choice ranks follow in sequence. The result is the sequential (j, t) order exactly.
__global__ void assign_kernel(AssignArgs a) {
  extern __shared__ int shared[];
  int* count = shared;                       // E: assignments so far per expert
  int* warp_count = shared + a.experts;      // kAssignWarps x E
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, E = a.experts;
  const long long rows = static_cast<long long>(E) * a.capacity;
  for (long long r = tid; r < rows; r += kAssignThreads) {
    a.row_token[r] = -1;
    a.row_choice[r] = -1;
  }
  for (int e = tid; e < E; e += kAssignThreads) count[e] = 0;
  __syncthreads();
  for (int j = 0; j < a.top_k; ++j) {
    for (long long base = 0; base < a.tokens; base += kAssignThreads) {
      const long long t = base + tid;
      const bool valid = t < a.tokens;
      const int e = valid ? a.topk_idx[t * a.top_k + j] : -1;
      const unsigned peers = __match_any_sync(0xffffffffu, e);
      const int rank_in_warp = __popc(peers & ((1u << lane) - 1u));
      for (int i = tid; i < kAssignWarps * E; i += kAssignThreads) warp_count[i] = 0;
      __syncthreads();
      if (valid && lane == __ffs(peers) - 1) warp_count[warp * E + e] = __popc(peers);
      __syncthreads();
      for (int x = tid; x < E; x += kAssignThreads) {
        int run = count[x];
        for (int w = 0; w < kAssignWarps; ++w) {
          const int c = warp_count[w * E + x];
          warp_count[w * E + x] = run;
          run += c;
        }
        count[x] = run;
      }
      __syncthreads();
      if (valid) {
        const long long slot = warp_count[warp * E + e] + rank_in_warp;
        if (slot < a.capacity) {
          const long long row = dispatch_row(e, slot, E, a.capacity, a.chunks);
          a.topk_row[t * a.top_k + j] = static_cast<int>(row);
          a.row_token[row] = static_cast<int>(t);
          a.row_choice[row] = j;
        } else {
          a.topk_row[t * a.top_k + j] = -1;
        }
      }
      __syncthreads();
    }
  }
  for (int e = tid; e < E; e += kAssignThreads)
    a.tokens_per_expert[e] = count[e] < a.capacity ? count[e] : static_cast<int>(a.capacity);
}

template <typename T>
__global__ void encode_kernel(const T* x, const int* row_token, long long d_model, long long begin, long long end,
                              T* out) {
  for (long long r = begin + blockIdx.x; r < end; r += gridDim.x) {
    const int t = row_token[r];
    for (long long c = threadIdx.x; c < d_model; c += blockDim.x)
      out[r * d_model + c] = t < 0 ? T(0.f) : x[t * d_model + c];
  }
}

template <typename T>
__global__ void activation_kernel(ActivationKind act, long long rows, long long H, const T* h, T* a) {
  const long long n = rows * H;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = i / H, c = i % H;
    if (act == ActivationKind::kSwiglu) {
      const float g = load(h, r * 2 * H + c), u = load(h, r * 2 * H + H + c);
      store(a, i, g * sigmoid(g) * u);
    } else {
      store(a, i, act_value(act, load(h, i)));
    }
  }
}

template <typename T>
__global__ void activation_backward_kernel(ActivationKind act, long long rows, long long H, const T* h, const T* da,
                                           T* dh, T* a) {
  const long long n = rows * H;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = i / H, c = i % H;
    const float d = load(da, i);  // read before dh (may alias da) is written
    if (act == ActivationKind::kSwiglu) {
      const float g = load(h, r * 2 * H + c), u = load(h, r * 2 * H + H + c), s = sigmoid(g), silu = g * s;
      store(dh, r * 2 * H + c, d * u * s * (1.f + g * (1.f - s)));
      store(dh, r * 2 * H + H + c, d * silu);
      if (a != nullptr) store(a, i, silu * u);
    } else {
      const float x = load(h, i);
      store(dh, i, d * act_derivative(act, x));
      if (a != nullptr) store(a, i, act_value(act, x));
    }
  }
}

// out_t = sum over kept j of (score_t,j, or 1 without scores) * rows[topk_row_t,j], in j order.
template <typename T>
__global__ void gather_kernel(const T* rows, const int* topk_row, const float* score, long long tokens, int k,
                              long long width, T* out) {
  for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    for (long long c = threadIdx.x; c < width; c += blockDim.x) {
      float sum = 0.f;
      for (int j = 0; j < k; ++j) {
        const int row = topk_row[t * k + j];
        if (row >= 0) sum += (score != nullptr ? score[t * k + j] : 1.f) * load(rows, row * width + c);
      }
      store(out, t * width + c, sum);
    }
  }
}

template <typename T>
__global__ void scatter_grad_kernel(DecodeBackwardArgs a) {
  const T* dy = static_cast<const T*>(a.dy);
  T* d = static_cast<T*>(a.d_expert_out);
  for (long long r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int t = a.row_token[r];
    const float s = t < 0 ? 0.f : a.topk_score[t * a.top_k + a.row_choice[r]];
    for (long long c = threadIdx.x; c < a.d_model; c += blockDim.x)
      store(d, r * a.d_model + c, t < 0 ? 0.f : s * load(dy, t * a.d_model + c));
  }
}

// One warp per (token, choice), grid-stride over the pairs (blocks_for caps the grid): a
// fixed-order shuffle reduction, so the result is deterministic. The loop bound is the same for
// every lane of a warp, so the full-mask shuffle stays warp-uniform.
template <typename T>
__global__ void dscores_kernel(DecodeBackwardArgs a) {
  const long long warps = static_cast<long long>(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  for (long long w = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32; w < a.tokens * a.top_k;
       w += warps) {
    const long long t = w / a.top_k;
    const int row = a.topk_row[w];
    float sum = 0.f;
    if (row >= 0)
      for (long long c = lane; c < a.d_model; c += 32)
        sum += load(static_cast<const T*>(a.dy), t * a.d_model + c) *
               load(static_cast<const T*>(a.expert_out), row * a.d_model + c);
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) a.dscores[w] = sum;
  }
}

template <typename T>
__global__ void route_backward_kernel(RouteBackwardArgs a) {
  const long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (t >= a.tokens) return;
  const int E = a.experts, k = a.top_k;
  const float* p = a.probs + t * E;
  const int* idx = a.topk_idx + t * k;
  const float* ds = a.dscores + t * k;
  float dp[kMaxTopK];
  float chosen = 0.f, sdot = 0.f;
  for (int j = 0; j < k; ++j) {
    chosen += p[idx[j]];
    sdot += ds[j] * a.topk_score[t * k + j];
  }
  float dot = 0.f;
  for (int j = 0; j < k; ++j) {
    dp[j] = a.normalize ? (ds[j] - sdot) / chosen : ds[j];
    dot += dp[j] * p[idx[j]];
  }
  T* out = static_cast<T*>(a.dlogits) + t * E;
  for (int e = 0; e < E; ++e) {
    float d = 0.f;
    for (int j = 0; j < k; ++j)
      if (idx[j] == e) d += dp[j];
    store(out, e, p[e] * (d - dot));
  }
}

void check_top_k(int k) {
  if (k < 1 || k > kMaxTopK)
    throw InputError("the routing kernels handle top_k up to " + std::to_string(kMaxTopK) + ", got " + std::to_string(k));
}

}  // namespace

void add(const AddArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    add_kernel<T><<<blocks_for(a.count, 256), 256, 0, s>>>(static_cast<T*>(a.dst), static_cast<const T*>(a.src),
                                                           a.count);
  });
  check_launch("add");
}

void fill(const FillArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill_kernel<T><<<blocks_for(a.count, 256), 256, 0, s>>>(static_cast<T*>(a.out), a.count, a.seed, a.scale);
  });
  check_launch("fill");
}

void route(const RouteArgs& a, cudaStream_t s) {
  check_top_k(a.top_k);
  route_kernel<<<blocks_for(a.tokens, 128), 128, 0, s>>>(a);
  check_launch("route");
}

void assign(const AssignArgs& a, cudaStream_t s) {
  check_top_k(a.top_k);
  if (a.experts > kMaxAssignExperts)
    throw InputError("the capacity assignment kernel handles up to " + std::to_string(kMaxAssignExperts) +
                     " experts, got " + std::to_string(a.experts));
  const std::size_t shared = sizeof(int) * static_cast<std::size_t>(a.experts) * (1 + kAssignWarps);
  assign_kernel<<<1, kAssignThreads, shared, s>>>(a);
  check_launch("assign");
}

void encode(const EncodeArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    encode_kernel<T><<<blocks_for((a.row_end - a.row_begin) * 32, 32), 128, 0, s>>>(
        static_cast<const T*>(a.x), a.row_token, a.d_model, a.row_begin, a.row_end, static_cast<T*>(a.out));
  });
  check_launch("encode");
}

void activation(const ActivationArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    activation_kernel<T><<<blocks_for(a.rows * a.width, 256), 256, 0, s>>>(
        a.act, a.rows, a.width, static_cast<const T*>(a.h), static_cast<T*>(a.a));
  });
  check_launch("activation");
}

void activation_backward(const ActivationBackwardArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    activation_backward_kernel<T><<<blocks_for(a.rows * a.width, 256), 256, 0, s>>>(
        a.act, a.rows, a.width, static_cast<const T*>(a.h), static_cast<const T*>(a.da), static_cast<T*>(a.dh),
        static_cast<T*>(a.a));
  });
  check_launch("activation backward");
}

void decode(const DecodeArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    gather_kernel<T><<<blocks_for(a.tokens * 32, 32), 128, 0, s>>>(static_cast<const T*>(a.expert_out), a.topk_row,
                                                                    a.topk_score, a.tokens, a.top_k, a.d_model,
                                                                    static_cast<T*>(a.y));
  });
  check_launch("decode");
}

void decode_backward(const DecodeBackwardArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    scatter_grad_kernel<T><<<blocks_for(a.rows * 32, 32), 128, 0, s>>>(a);
    dscores_kernel<T><<<blocks_for(a.tokens * a.top_k * 32, 256), 256, 0, s>>>(a);
  });
  check_launch("decode backward");
}

void encode_backward(const EncodeBackwardArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    gather_kernel<T><<<blocks_for(a.tokens * 32, 32), 128, 0, s>>>(static_cast<const T*>(a.d_dispatch), a.topk_row,
                                                                    nullptr, a.tokens, a.top_k, a.d_model,
                                                                    static_cast<T*>(a.dx));
  });
  check_launch("encode backward");
}

void route_backward(const RouteBackwardArgs& a, cudaStream_t s) {
  check_top_k(a.top_k);
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    route_backward_kernel<T><<<blocks_for(a.tokens, 128), 128, 0, s>>>(a);
  });
  check_launch("route backward");
}

}  // namespace moesim::runtime::cuda
