#include "runtime/kernels/moe_kernels.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/device/device_radix_sort.cuh>
#include <string>
#include <type_traits>

#include "runtime/kernels/dispatch_layout.h"
#include "runtime/kernels/element_ops.cuh"
#include "runtime/kernels/packed_kernels.cuh"
#include "runtime/kernels/routing.h"
#include "sim/core/error.h"

namespace moesim::runtime::cuda {

namespace {

using namespace detail;  // element_ops.cuh, packed_kernels.cuh

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

// The lanes of route_token (routing.h) on a GPU: this thread is lane threadIdx.x % 32 of a warp
// that routes one token; the butterfly is __shfl_xor_sync over the whole warp, so every lane of
// the warp must call it (route_kernel keeps the warp together).
struct WarpLanes {
  static constexpr unsigned kAll = 0xffffffffu;
  int lane;
  template <typename F>
  __device__ void each(F f) const {
    f(lane);
  }
  template <typename F>
  __device__ float max(F f) const {
    float v = f(lane);
    for (int offset = kRouteLanes / 2; offset > 0; offset /= 2) v = larger(v, __shfl_xor_sync(kAll, v, offset));
    return v;
  }
  template <typename F>
  __device__ float sum(F f) const {
    float v = f(lane);
    for (int offset = kRouteLanes / 2; offset > 0; offset /= 2) v = v + __shfl_xor_sync(kAll, v, offset);
    return v;
  }
  template <typename F>
  __device__ RoutePick best(F f) const {
    RoutePick v = f(lane);
    for (int offset = kRouteLanes / 2; offset > 0; offset /= 2)
      v = first_ranked(v, RoutePick{__shfl_xor_sync(kAll, v.p, offset), __shfl_xor_sync(kAll, v.e, offset)});
    return v;
  }
  __device__ bool leader() const { return lane == 0; }
};
static_assert(kRouteLanes == 32, "WarpLanes maps the route lanes onto a warp");

// A warp per token, grid-stride over tokens by warp: the loop bound is the same for every lane of
// a warp, so the full-warp shuffles in WarpLanes stay warp-uniform.
__global__ void route_kernel(RouteArgs a) {
  const long long warps = static_cast<long long>(gridDim.x) * blockDim.x / 32;
  WarpLanes lanes{static_cast<int>(threadIdx.x & 31)};
  for (long long t = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32; t < a.tokens; t += warps)
    route_token(lanes, a.logits + t * a.experts, a.experts, a.top_k, a.normalize, a.probs + t * a.experts,
                a.topk_idx + t * a.top_k, a.topk_score + t * a.top_k);
}

// The capacity assignment's steps (routing.h), one thread per element, grid-stride.
__global__ void assignment_keys_kernel(AssignArgs a, std::uint32_t* keys, std::int32_t* choice) {
  const long long n = a.tokens * a.top_k;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    keys[i] = assignment_key(a.topk_idx, a.tokens, a.top_k, i);
    choice[i] = static_cast<std::int32_t>(i);
  }
}

__global__ void run_start_kernel(const std::uint32_t* sorted_keys, long long n, std::int32_t* run_start) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    record_run_start(sorted_keys, i, run_start);
}

__global__ void place_kernel(AssignArgs a, const std::uint32_t* sorted_keys, const std::int32_t* sorted_choice,
                             const std::int32_t* run_start) {
  const long long n = a.tokens * a.top_k;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    place_assignment(a, sorted_keys, sorted_choice, run_start, i);
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

// A block per row (grid-stride over rows), threads over the row's columns: no per-element
// division to find (row, column). The first version divided a flat 64-bit index by H for every
// element, which on an H200 ran the MoE-GPT-XL activation at about a quarter of the memory
// bandwidth (499 us forward against 125 us for its bytes, validate/results/h200-2026-11-26).
template <typename T>
__global__ void activation_kernel(ActivationKind act, long long rows, long long H, const T* h, T* a) {
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    if (act == ActivationKind::kSwiglu) {
      for (long long c = threadIdx.x; c < H; c += blockDim.x) {
        const float g = load(h, r * 2 * H + c), u = load(h, r * 2 * H + H + c);
        store(a, r * H + c, g * sigmoid(g) * u);
      }
    } else {
      for (long long i = r * H + threadIdx.x; i < (r + 1) * H; i += blockDim.x) store(a, i, act_value(act, load(h, i)));
    }
  }
}

template <typename T>
__global__ void activation_backward_kernel(ActivationKind act, long long rows, long long H, const T* h, const T* da,
                                           T* dh, T* a) {
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    for (long long c = threadIdx.x; c < H; c += blockDim.x) {
      const long long i = r * H + c;
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
// every lane of a warp, so the full-mask shuffle stays warp-uniform. kPacked: each lane reads whole
// 16-byte packs (element_ops.cuh), a different but fixed order of additions.
template <typename T, bool kPacked>
__global__ void dscores_kernel(DecodeBackwardArgs a) {
  const long long warps = static_cast<long long>(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  const T* dy = static_cast<const T*>(a.dy);
  const T* y = static_cast<const T*>(a.expert_out);
  for (long long w = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32; w < a.tokens * a.top_k;
       w += warps) {
    const long long t = w / a.top_k;
    const int row = a.topk_row[w];
    float sum = 0.f;
    if constexpr (kPacked) {
      constexpr int N = Pack<T>::kN;
      for (long long c = lane * static_cast<long long>(N); row >= 0 && c < a.d_model; c += 32LL * N) {
        const Pack<T> u = Pack<T>::at(dy, t * a.d_model + c), v = Pack<T>::at(y, row * a.d_model + c);
#pragma unroll
        for (int e = 0; e < N; ++e) sum += u.get(e) * v.get(e);
      }
    } else {
      for (long long c = lane; row >= 0 && c < a.d_model; c += 32)
        sum += load(dy, t * a.d_model + c) * load(y, row * a.d_model + c);
    }
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) a.dscores[w] = sum;
  }
}

// A warp per token, grid-stride: every lane forms the token's O(k) terms, then lane l writes the
// gradient of experts l, l + 32, ... (coalesced, and the O(E k) work split 32 ways).
template <typename T>
__global__ void route_backward_kernel(RouteBackwardArgs a) {
  const int E = a.experts, k = a.top_k;
  const long long warps = static_cast<long long>(gridDim.x) * blockDim.x / 32;
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (long long t = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32; t < a.tokens; t += warps) {
    const float* p = a.probs + t * E;
    const std::int32_t* idx = a.topk_idx + t * k;
    const float* ds = a.dscores + t * k;
    const RouteGradTerms g = route_grad_terms(p, idx, a.topk_score + t * k, ds, k, a.normalize);
    T* out = static_cast<T*>(a.dlogits) + t * E;
    for (int e = lane; e < E; e += 32) store(out, e, route_dlogit(e, p, idx, ds, k, a.normalize, g));
  }
}

// decode's and encode's backward gather: packed where the rows allow.
template <typename T>
void gather(const T* rows, const int* topk_row, const float* score, long long tokens, int k, long long width, T* out,
            cudaStream_t s) {
  if (fits_packs<T>(width, {rows, out}))
    gather_packed_kernel<T><<<blocks_for(tokens * 32, 32), 128, 0, s>>>(rows, topk_row, score, tokens, k, width, out);
  else
    gather_kernel<T><<<blocks_for(tokens * 32, 32), 128, 0, s>>>(rows, topk_row, score, tokens, k, width, out);
}

void check_call(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw InternalError(std::string(what) + " failed: " + cudaGetErrorString(err));
}

// Where the assignment's arrays lie in its scratch (from `base`, or from 0 to size it): the keys
// and the choice indices before and after the sort, the run starts, and cub's temporary storage.
struct AssignScratch {
  std::uint32_t* keys_in = nullptr;
  std::uint32_t* keys_out = nullptr;
  std::int32_t* choice_in = nullptr;
  std::int32_t* choice_out = nullptr;
  std::int32_t* run_start = nullptr;
  void* sort_temp = nullptr;
  std::size_t sort_temp_bytes = 0;
  int key_bits = 1;
  std::int64_t total_bytes = 0;
};

AssignScratch assign_scratch(void* base, long long tokens, int top_k, int experts) {
  AssignScratch w;
  while ((1LL << w.key_bits) < experts) ++w.key_bits;  // keys are expert indices < experts
  const int n = static_cast<int>(tokens * top_k);       // the executor keeps B x k within int32
  check_call(cub::DeviceRadixSort::SortPairs(nullptr, w.sort_temp_bytes, w.keys_in, w.keys_out, w.choice_in,
                                             w.choice_out, n, 0, w.key_bits),
             "sizing cub::DeviceRadixSort::SortPairs");
  char* at = static_cast<char*>(base);
  const auto take = [&](auto*& ptr, std::int64_t bytes) {
    ptr = reinterpret_cast<std::remove_reference_t<decltype(ptr)>>(at == nullptr ? nullptr : at + w.total_bytes);
    w.total_bytes += (bytes + 255) / 256 * 256;
  };
  take(w.keys_in, 4LL * n);
  take(w.keys_out, 4LL * n);
  take(w.choice_in, 4LL * n);
  take(w.choice_out, 4LL * n);
  take(w.run_start, 4LL * experts);
  char* temp = nullptr;
  take(temp, static_cast<std::int64_t>(w.sort_temp_bytes));
  w.sort_temp = temp;
  return w;
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

cudaError_t kernel_image_status() {
  cudaFuncAttributes attributes{};
  const cudaError_t err = cudaFuncGetAttributes(&attributes, fill_kernel<float>);
  if (err != cudaSuccess) cudaGetLastError();
  return err;
}

void fill(const FillArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill_kernel<T><<<blocks_for(a.count, 256), 256, 0, s>>>(static_cast<T*>(a.out), a.count, a.seed, a.scale);
  });
  check_launch("fill");
}

void route(const RouteArgs& a, cudaStream_t s) {
  route_kernel<<<blocks_for(a.tokens * 32, 128), 128, 0, s>>>(a);
  check_launch("route");
}

std::int64_t assign_scratch_bytes(std::int64_t tokens, int top_k, int experts) {
  return assign_scratch(nullptr, tokens, top_k, experts).total_bytes;
}

void assign(const AssignArgs& a, cudaStream_t s) {
  const AssignScratch w = assign_scratch(a.scratch, a.tokens, a.top_k, a.experts);
  if (a.scratch == nullptr || a.scratch_bytes < w.total_bytes)
    throw InternalError("the capacity assignment got " + std::to_string(a.scratch_bytes) + " bytes of scratch, needs " +
                        std::to_string(w.total_bytes));
  const std::size_t rows = static_cast<std::size_t>(a.experts) * static_cast<std::size_t>(a.capacity);
  check_call(cudaMemsetAsync(a.row_token, 0xFF, rows * 4, s), "cudaMemsetAsync (row_token = -1)");
  check_call(cudaMemsetAsync(a.row_choice, 0xFF, rows * 4, s), "cudaMemsetAsync (row_choice = -1)");
  check_call(cudaMemsetAsync(a.tokens_per_expert, 0, static_cast<std::size_t>(a.experts) * 4, s),
             "cudaMemsetAsync (tokens_per_expert = 0)");
  const long long n = a.tokens * a.top_k;
  if (n == 0) return;
  assignment_keys_kernel<<<blocks_for(n, 256), 256, 0, s>>>(a, w.keys_in, w.choice_in);
  check_launch("assignment keys");
  std::size_t temp_bytes = w.sort_temp_bytes;
  check_call(cub::DeviceRadixSort::SortPairs(w.sort_temp, temp_bytes, w.keys_in, w.keys_out, w.choice_in, w.choice_out,
                                             static_cast<int>(n), 0, w.key_bits, s),
             "cub::DeviceRadixSort::SortPairs");
  run_start_kernel<<<blocks_for(n, 256), 256, 0, s>>>(w.keys_out, n, w.run_start);
  check_launch("assignment run starts");
  place_kernel<<<blocks_for(n, 256), 256, 0, s>>>(a, w.keys_out, w.choice_out, w.run_start);
  check_launch("assignment placement");
}

void encode(const EncodeArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const unsigned blocks = blocks_for((a.row_end - a.row_begin) * 32, 32);
    if (fits_packs<T>(a.d_model, {a.x, a.out}))
      encode_packed_kernel<T><<<blocks, 128, 0, s>>>(static_cast<const T*>(a.x), a.row_token, a.d_model, a.row_begin,
                                                      a.row_end, static_cast<T*>(a.out));
    else
      encode_kernel<T><<<blocks, 128, 0, s>>>(static_cast<const T*>(a.x), a.row_token, a.d_model, a.row_begin,
                                               a.row_end, static_cast<T*>(a.out));
  });
  check_launch("encode");
}

void activation(const ActivationArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (fits_packs<T>(a.width, {a.h, a.a}))
      activation_packed_kernel<T><<<blocks_for(a.rows, 1), 256, 0, s>>>(
          a.act, a.rows, a.width, static_cast<const T*>(a.h), static_cast<T*>(a.a));
    else
      activation_kernel<T><<<blocks_for(a.rows, 1), 256, 0, s>>>(
          a.act, a.rows, a.width, static_cast<const T*>(a.h), static_cast<T*>(a.a));
  });
  check_launch("activation");
}

void activation_backward(const ActivationBackwardArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (fits_packs<T>(a.width, {a.h, a.da, a.dh, a.a}))
      activation_backward_packed_kernel<T><<<blocks_for(a.rows, 1), 256, 0, s>>>(
          a.act, a.rows, a.width, static_cast<const T*>(a.h), static_cast<const T*>(a.da), static_cast<T*>(a.dh),
          static_cast<T*>(a.a));
    else
      activation_backward_kernel<T><<<blocks_for(a.rows, 1), 256, 0, s>>>(
          a.act, a.rows, a.width, static_cast<const T*>(a.h), static_cast<const T*>(a.da), static_cast<T*>(a.dh),
          static_cast<T*>(a.a));
  });
  check_launch("activation backward");
}

void decode(const DecodeArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    gather<T>(static_cast<const T*>(a.expert_out), a.topk_row, a.topk_score, a.tokens, a.top_k, a.d_model,
              static_cast<T*>(a.y), s);
  });
  check_launch("decode");
}

void decode_backward(const DecodeBackwardArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const bool packed = fits_packs<T>(a.d_model, {a.dy, a.expert_out, a.d_expert_out});
    if (packed)
      scatter_grad_packed_kernel<T><<<blocks_for(a.rows * 32, 32), 128, 0, s>>>(a);
    else
      scatter_grad_kernel<T><<<blocks_for(a.rows * 32, 32), 128, 0, s>>>(a);
    if (packed)
      dscores_kernel<T, true><<<blocks_for(a.tokens * a.top_k * 32, 256), 256, 0, s>>>(a);
    else
      dscores_kernel<T, false><<<blocks_for(a.tokens * a.top_k * 32, 256), 256, 0, s>>>(a);
  });
  check_launch("decode backward");
}

void encode_backward(const EncodeBackwardArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    gather<T>(static_cast<const T*>(a.d_dispatch), a.topk_row, nullptr, a.tokens, a.top_k, a.d_model,
              static_cast<T*>(a.dx), s);
  });
  check_launch("encode backward");
}

void route_backward(const RouteBackwardArgs& a, cudaStream_t s) {
  by_type(a.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    route_backward_kernel<T><<<blocks_for(a.tokens * 32, 128), 128, 0, s>>>(a);
  });
  check_launch("route backward");
}

}  // namespace moesim::runtime::cuda
