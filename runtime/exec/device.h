// The device the executor drives, as a narrow interface: streams, events, memory, copies, the
// MoE kernels and strided-batched GEMMs. Two implementations: CudaDevice (cuda_device.cu: CUDA
// runtime, cuBLAS, the kernels of runtime/kernels) and HostDevice (host_device.h: runs every
// operation at once on the CPU in fp32, the executable specification). The executor's lowering
// (layer_executor.h) is written once against this interface, so its stream use, buffer offsets,
// chunking, restore paths and all-to-all layouts are tested on machines without a GPU.
//
// Kept free of CUDA headers (design note: every `.cc` under runtime/ is host code).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernels/kernel_args.h"
#include "sim/spec/types.h"

namespace moesim::runtime {

// How a GEMM multiplies: fp32, tf32 tensor cores on fp32 storage, or bf16 / fp16 storage with
// tensor cores; always accumulated in fp32 (cuBLAS compute type 32F or 32F_FAST_TF32).
enum class GemmMath { kF32 = 0, kTf32 = 1, kHalf = 2 };

// The storage of a model dtype (tf32 is fp32 storage), and the math of its GEMMs.
inline Storage storage_of(DType d) {
  switch (d) {
    case DType::kFp32:
    case DType::kTf32: return Storage::kF32;
    case DType::kBf16: return Storage::kBf16;
    case DType::kFp16: return Storage::kF16;
    case DType::kFp8: break;  // a GEMM precision only: the loader refuses it as a storage type
  }
  return Storage::kF32;
}

inline GemmMath math_of(DType storage, DType gemm) {
  if (storage != DType::kFp32 && storage != DType::kTf32) return GemmMath::kHalf;
  return gemm == DType::kTf32 ? GemmMath::kTf32 : GemmMath::kF32;
}

// Row-major C[b] = op(A[b]) op(B[b]) (+ C[b] when accumulate), b < batch; op(X) = X or X^T.
// op(A) is m x k, op(B) is k x n, C is m x n; ld* are the row strides of the stored matrices.
struct GemmArgs {
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  std::int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  std::int64_t ldc = 0, stride_c = 0;
  Storage ab_type = Storage::kF32;
  Storage c_type = Storage::kF32;  // fp32 output from bf16 / fp16 inputs is allowed
  GemmMath math = GemmMath::kF32;
  bool accumulate = false;         // beta = 1
};

// One device (a GPU, or the CPU emulation). Streams and events are small integers; every
// operation is asynchronous on its stream (HostDevice runs it at once, which is one of the
// executions the stream order allows because the executor issues in a topological order).
class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  virtual std::string name() const = 0;

  virtual int create_stream() = 0;
  // timing: the event can be used with elapsed_ms (CUDA events without cudaEventDisableTiming).
  virtual int create_event(bool timing) = 0;
  virtual void record(int event, int stream) = 0;
  virtual void wait(int stream, int event) = 0;
  virtual void synchronize() = 0;
  // Milliseconds between two recorded, completed timing events.
  virtual float elapsed_ms(int from, int to) = 0;

  // Throws InputError naming the requested and free bytes when memory runs out.
  virtual void* alloc_device(std::int64_t bytes, const char* what) = 0;
  virtual void* alloc_pinned(std::int64_t bytes, const char* what) = 0;
  virtual void free_device(void* p) = 0;
  virtual void free_pinned(void* p) = 0;
  // Bytes allocated by the library itself (cuBLAS workspace), included in the measured peak.
  virtual std::int64_t library_workspace_bytes() const = 0;

  // Any direction (unified addressing). rows pieces of `width` bytes, strided (cudaMemcpy2DAsync).
  virtual void copy(void* dst, const void* src, std::int64_t bytes, int stream) = 0;
  virtual void copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch,
                       std::int64_t width, std::int64_t rows, int stream) = 0;
  virtual void zero(void* dst, std::int64_t bytes, int stream) = 0;
  // Blocking copy of device bytes to the host (after synchronize), for results and checks.
  virtual void download(void* host_dst, const void* src, std::int64_t bytes) = 0;

  virtual void gemm(const GemmArgs& args, int stream) = 0;
  virtual void fill(const FillArgs& args, int stream) = 0;
  virtual void add(const AddArgs& args, int stream) = 0;
  virtual void route(const RouteArgs& args, int stream) = 0;
  // args.scratch holds assign_scratch_bytes(tokens, top_k, experts) bytes of device memory.
  virtual std::int64_t assign_scratch_bytes(std::int64_t tokens, int top_k, int experts) = 0;
  virtual void assign(const AssignArgs& args, int stream) = 0;
  virtual void encode(const EncodeArgs& args, int stream) = 0;
  virtual void activation(const ActivationArgs& args, int stream) = 0;
  virtual void activation_backward(const ActivationBackwardArgs& args, int stream) = 0;
  virtual void decode(const DecodeArgs& args, int stream) = 0;
  virtual void decode_backward(const DecodeBackwardArgs& args, int stream) = 0;
  virtual void encode_backward(const EncodeBackwardArgs& args, int stream) = 0;
  virtual void route_backward(const RouteBackwardArgs& args, int stream) = 0;
};

class Transport;
class ProcessGroup;

// Opens the devices of this process (CudaProvider in cuda_device.cu).
class DeviceProvider {
 public:
  virtual ~DeviceProvider() = default;
  // Empty when devices can be used; otherwise why not (e.g. "cudaGetDeviceCount failed: ...").
  virtual std::string unavailable_reason() const = 0;
  virtual int num_devices() const = 0;
  virtual std::string describe(int ordinal) const = 0;
  // What tells this device apart from every other one on the host (a GPU's PCI bus id), so that
  // processes can find out that they were given the same one.
  virtual std::string identity(int ordinal) const = 0;
  virtual std::unique_ptr<DeviceOps> open(int ordinal) = 0;
  // A transport over `devices` (one rank each, rank = position), or InputError when this build
  // has none (no NCCL).
  virtual std::unique_ptr<Transport> multi_device_transport(const std::vector<DeviceOps*>& devices) = 0;
  // A transport for one rank per process of `group` (rank = the process's rank), `device` being
  // this process's, or InputError when this build has none (no NCCL).
  virtual std::unique_ptr<Transport> process_transport(DeviceOps* device, ProcessGroup& group) = 0;
};

}  // namespace moesim::runtime
