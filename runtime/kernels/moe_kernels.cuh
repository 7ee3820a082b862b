// Launchers of the MoE layer's CUDA kernels: raw pointers, sizes and a stream; the storage type in
// the argument struct selects the template instance (fp32, bf16, fp16; math in fp32). Semantics:
// kernel_args.h, specified executably by host_kernels.cc.
#pragma once

#include <cuda_runtime.h>

#include "runtime/kernels/kernel_args.h"

namespace moesim::runtime::cuda {

void fill(const FillArgs& a, cudaStream_t s);
// Whether the current device can run this build's kernels: cudaFuncGetAttributes on one of them
// (cudaSuccess, or the driver's reason, e.g. cudaErrorNoKernelImageForDevice). Clears the error.
cudaError_t kernel_image_status();
void add(const AddArgs& a, cudaStream_t s);
void route(const RouteArgs& a, cudaStream_t s);
// A stable radix sort of the choices by expert (routing.h): deterministic, any number of experts.
// a.scratch holds assign_scratch_bytes(a.tokens, a.top_k, a.experts) bytes of device memory.
std::int64_t assign_scratch_bytes(std::int64_t tokens, int top_k, int experts);
void assign(const AssignArgs& a, cudaStream_t s);
void encode(const EncodeArgs& a, cudaStream_t s);
void activation(const ActivationArgs& a, cudaStream_t s);
void activation_backward(const ActivationBackwardArgs& a, cudaStream_t s);
void decode(const DecodeArgs& a, cudaStream_t s);
void decode_backward(const DecodeBackwardArgs& a, cudaStream_t s);
void encode_backward(const EncodeBackwardArgs& a, cudaStream_t s);
void route_backward(const RouteBackwardArgs& a, cudaStream_t s);

}  // namespace moesim::runtime::cuda
