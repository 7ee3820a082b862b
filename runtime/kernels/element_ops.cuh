// Element access and activation math shared by the MoE layer's CUDA kernels (moe_kernels.cu and
// packed_kernels.cuh): values are stored as fp32, bf16 or fp16 and computed in fp32. Included by
// moe_kernels.cu only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>

#include "runtime/kernels/kernel_args.h"

namespace moesim::runtime::cuda::detail {

template <typename T> __device__ __forceinline__ float load(const T* p, long long i);
template <> __device__ __forceinline__ float load(const float* p, long long i) { return p[i]; }
template <> __device__ __forceinline__ float load(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
template <> __device__ __forceinline__ float load(const __half* p, long long i) { return __half2float(p[i]); }

template <typename T> __device__ __forceinline__ void store(T* p, long long i, float v);
template <> __device__ __forceinline__ void store(float* p, long long i, float v) { p[i] = v; }
template <> __device__ __forceinline__ void store(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }
template <> __device__ __forceinline__ void store(__half* p, long long i, float v) { p[i] = __float2half(v); }

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

// 16 bytes of T (8 bf16 / fp16 or 4 fp32 values), loaded and stored as one uint4: a quarter to an
// eighth of the memory instructions of element-wise access.
template <typename T>
struct Pack {
  static constexpr int kN = 16 / static_cast<int>(sizeof(T));
  uint4 raw;
  __device__ __forceinline__ static Pack at(const T* p, long long i) { return Pack{*reinterpret_cast<const uint4*>(p + i)}; }
  __device__ __forceinline__ float get(int j) const { return load(reinterpret_cast<const T*>(&raw), j); }
  __device__ __forceinline__ void set(int j, float v) { store(reinterpret_cast<T*>(&raw), j, v); }
  __device__ __forceinline__ void put(T* p, long long i) const { *reinterpret_cast<uint4*>(p + i) = raw; }
};

// Whether packed kernels apply: rows of `width` elements are whole packs of T and every array
// (null ones aside) is 16-byte aligned, so that each row starts on a pack.
template <typename T>
bool fits_packs(long long width, std::initializer_list<const void*> arrays) {
  if (width % (16 / static_cast<long long>(sizeof(T))) != 0) return false;
  for (const void* p : arrays)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}

}  // namespace moesim::runtime::cuda::detail
