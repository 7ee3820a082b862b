// The MoE layer's memory-bound kernels 16 bytes at a time (element_ops.cuh, Pack): activation
// forward and backward, encode, decode's gather and its gradient scatter (the score gradients'
// kernel in moe_kernels.cu reads packs too).
// moe_kernels.cu launches them where fits_packs allows and its element-wise kernels otherwise.
// Included by moe_kernels.cu only.
#pragma once

#include "runtime/kernels/element_ops.cuh"

namespace moesim::runtime::cuda::detail {

// The activations a pack at a time (8 bf16/fp16 or 4 fp32 values per load and store). With one
// 2-byte access per element, the element-wise kernels ran the MoE-GPT-XL bf16 activation on an
// H200 at 2.6x (forward, 319 us) and 4x (backward, 742 us) its bytes over HBM bandwidth; packed,
// 197 and 432 us (validate/results/h200-2026-11-26, call 8).
template <typename T>
__global__ void activation_packed_kernel(ActivationKind act, long long rows, long long H, const T* __restrict__ h,
                                         T* __restrict__ a) {
  constexpr int N = Pack<T>::kN;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x)
    for (long long c = threadIdx.x * static_cast<long long>(N); c < H; c += blockDim.x * static_cast<long long>(N)) {
      Pack<T> out;
      if (act == ActivationKind::kSwiglu) {
        const Pack<T> g = Pack<T>::at(h, r * 2 * H + c), u = Pack<T>::at(h, r * 2 * H + H + c);
#pragma unroll
        for (int j = 0; j < N; ++j) out.set(j, g.get(j) * sigmoid(g.get(j)) * u.get(j));
      } else {
        const Pack<T> x = Pack<T>::at(h, r * H + c);
#pragma unroll
        for (int j = 0; j < N; ++j) out.set(j, act_value(act, x.get(j)));
      }
      out.put(a, r * H + c);
    }
}

// dh may alias da (relu / gelu): each thread reads its whole pack of da before writing dh's.
template <typename T>
__global__ void activation_backward_packed_kernel(ActivationKind act, long long rows, long long H, const T* h,
                                                  const T* da, T* dh, T* a) {
  constexpr int N = Pack<T>::kN;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x)
    for (long long c = threadIdx.x * static_cast<long long>(N); c < H; c += blockDim.x * static_cast<long long>(N)) {
      const long long i = r * H + c;
      const Pack<T> d = Pack<T>::at(da, i);
      Pack<T> out, fwd;
      if (act == ActivationKind::kSwiglu) {
        const Pack<T> g = Pack<T>::at(h, r * 2 * H + c), u = Pack<T>::at(h, r * 2 * H + H + c);
        Pack<T> du;
#pragma unroll
        for (int j = 0; j < N; ++j) {
          const float gj = g.get(j), uj = u.get(j), s = sigmoid(gj), silu = gj * s;
          out.set(j, d.get(j) * uj * s * (1.f + gj * (1.f - s)));
          du.set(j, d.get(j) * silu);
          fwd.set(j, silu * uj);
        }
        out.put(dh, r * 2 * H + c);
        du.put(dh, r * 2 * H + H + c);
      } else {
        const Pack<T> x = Pack<T>::at(h, i);
#pragma unroll
        for (int j = 0; j < N; ++j) {
          out.set(j, d.get(j) * act_derivative(act, x.get(j)));
          if (a != nullptr) fwd.set(j, act_value(act, x.get(j)));
        }
        out.put(dh, i);
      }
      if (a != nullptr) fwd.put(a, i);
    }
}

// The gathers and scatters of encode and decode, a pack at a time (same sums in the same order as
// their element-wise kernels in moe_kernels.cu, which run when fits_packs says no). On an H200 the
// element-wise decode of MoE-GPT-XL bf16 took 97 us against 37 us for its bytes.
template <typename T>
__global__ void encode_packed_kernel(const T* __restrict__ x, const int* row_token, long long d_model, long long begin,
                                     long long end, T* __restrict__ out) {
  constexpr int N = Pack<T>::kN;
  for (long long r = begin + blockIdx.x; r < end; r += gridDim.x) {
    const int t = row_token[r];
    for (long long c = threadIdx.x * static_cast<long long>(N); c < d_model; c += blockDim.x * static_cast<long long>(N)) {
      Pack<T> v{make_uint4(0, 0, 0, 0)};  // all-zero bits are 0.0 in every storage type
      if (t >= 0) v = Pack<T>::at(x, t * d_model + c);
      v.put(out, r * d_model + c);
    }
  }
}

template <typename T>
__global__ void gather_packed_kernel(const T* __restrict__ rows, const int* topk_row, const float* score,
                                     long long tokens, int k, long long width, T* __restrict__ out) {
  constexpr int N = Pack<T>::kN;
  for (long long t = blockIdx.x; t < tokens; t += gridDim.x)
    for (long long c = threadIdx.x * static_cast<long long>(N); c < width; c += blockDim.x * static_cast<long long>(N)) {
      float sum[N];
#pragma unroll
      for (int e = 0; e < N; ++e) sum[e] = 0.f;
      for (int j = 0; j < k; ++j) {
        const int row = topk_row[t * k + j];
        if (row < 0) continue;
        const float s = score != nullptr ? score[t * k + j] : 1.f;
        const Pack<T> v = Pack<T>::at(rows, row * width + c);
#pragma unroll
        for (int e = 0; e < N; ++e) sum[e] += s * v.get(e);
      }
      Pack<T> o;
#pragma unroll
      for (int e = 0; e < N; ++e) o.set(e, sum[e]);
      o.put(out, t * width + c);
    }
}

template <typename T>
__global__ void scatter_grad_packed_kernel(DecodeBackwardArgs a) {
  constexpr int N = Pack<T>::kN;
  const T* dy = static_cast<const T*>(a.dy);
  T* d = static_cast<T*>(a.d_expert_out);
  for (long long r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int t = a.row_token[r];
    const float s = t < 0 ? 0.f : a.topk_score[t * a.top_k + a.row_choice[r]];
    for (long long c = threadIdx.x * static_cast<long long>(N); c < a.d_model; c += blockDim.x * static_cast<long long>(N)) {
      Pack<T> o{make_uint4(0, 0, 0, 0)};
      if (t >= 0) {
        const Pack<T> v = Pack<T>::at(dy, t * a.d_model + c);
#pragma unroll
        for (int e = 0; e < N; ++e) o.set(e, s * v.get(e));
      }
      o.put(d, r * a.d_model + c);
    }
  }
}

}  // namespace moesim::runtime::cuda::detail
