// The MoE kernels and the GEMM on the CPU, in fp32 storage only: the executable specification of
// what moe_kernels.cu computes (same argument structs, same conventions), used by HostDevice so
// the executor's lowering is tested against the double-precision reference without a GPU.
// Every function throws InputError for a storage type other than fp32.
#pragma once

#include "runtime/exec/device.h"
#include "runtime/kernels/kernel_args.h"

namespace moesim::runtime::host {

void fill(const FillArgs& a);
void add(const AddArgs& a);
void route(const RouteArgs& a);
void assign(const AssignArgs& a);
void encode(const EncodeArgs& a);
void activation(const ActivationArgs& a);
void activation_backward(const ActivationBackwardArgs& a);
void decode(const DecodeArgs& a);
void decode_backward(const DecodeBackwardArgs& a);
void encode_backward(const EncodeBackwardArgs& a);
void route_backward(const RouteBackwardArgs& a);
void gemm(const GemmArgs& a);

}  // namespace moesim::runtime::host
