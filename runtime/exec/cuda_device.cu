#include "runtime/exec/cuda_device.cuh"

#include <string>

#include "runtime/exec/cuda_device.h"
#include "runtime/exec/gpu_compat.h"
#include "runtime/exec/gpu_probe.h"
#include "runtime/kernels/moe_kernels.cuh"
#include "sim/core/error.h"

#if MOESIM_HAVE_NCCL
#include "runtime/comm/nccl_transport.h"
#endif

namespace moesim::runtime {

void cuda_check(cudaError_t err, const char* call) {
  if (err != cudaSuccess)
    throw InternalError(std::string(call) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

#define MOESIM_CUDA(call) cuda_check((call), #call)

namespace {

void cublas_check(cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw InternalError(std::string(call) + " failed: cuBLAS status " + std::to_string(static_cast<int>(st)));
}

cudaDataType_t data_type(Storage s) {
  switch (s) {
    case Storage::kF32: return CUDA_R_32F;
    case Storage::kBf16: return CUDA_R_16BF;
    case Storage::kF16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

cublasComputeType_t compute_type(GemmMath m) {
  return m == GemmMath::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  select();
  cudaDeviceProp prop{};
  MOESIM_CUDA(cudaGetDeviceProperties(&prop, ordinal_));
  name_ = std::string(prop.name) + " (GPU " + std::to_string(ordinal_) + ")";
  compute_major_ = prop.major;
  compute_minor_ = prop.minor;
  // The driver, not a rule of ours, decides whether the build's code runs here (PTX JIT, family
  // and architecture-specific targets, Tegra); a refusal becomes a readable input error.
  const cudaError_t image = cuda::kernel_image_status();
  if (image != cudaSuccess) {
    const std::string error = cudaGetErrorName(image);
    if (image == cudaErrorNoKernelImageForDevice || image == cudaErrorInvalidDeviceFunction ||
        image == cudaErrorUnsupportedPtxVersion || image == cudaErrorInvalidPtx)
      throw InputError(no_kernel_image_message(name_, compute_major_, compute_minor_, MOESIM_CUDA_ARCHITECTURES, error,
                                               CUDART_VERSION >= 13000));
    cuda_check(image, "cudaFuncGetAttributes");
  }
}

CudaDevice::~CudaDevice() {
  // Destructors must not throw: failures here are ignored, the process is ending its use.
  cudaSetDevice(ordinal_);
  cudaDeviceSynchronize();
  for (auto& [stream, h] : handles_) cublasDestroy(h);
  for (void* w : workspaces_) cudaFree(w);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  for (cudaStream_t st : streams_) cudaStreamDestroy(st);
}

void CudaDevice::select() const { MOESIM_CUDA(cudaSetDevice(ordinal_)); }

std::string CudaDevice::name() const { return name_; }

int CudaDevice::create_stream() {
  select();
  cudaStream_t st = nullptr;
  MOESIM_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  streams_.push_back(st);
  return static_cast<int>(streams_.size()) - 1;
}

int CudaDevice::create_event(bool timing) {
  select();
  cudaEvent_t e = nullptr;
  MOESIM_CUDA(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  events_.push_back(e);
  return static_cast<int>(events_.size()) - 1;
}

void CudaDevice::record(int event, int stream) {
  select();
  MOESIM_CUDA(cudaEventRecord(events_.at(static_cast<std::size_t>(event)), s(stream)));
}

void CudaDevice::wait(int stream, int event) {
  select();
  MOESIM_CUDA(cudaStreamWaitEvent(s(stream), events_.at(static_cast<std::size_t>(event)), 0));
}

void CudaDevice::synchronize() {
  select();
  MOESIM_CUDA(cudaDeviceSynchronize());
}

bool CudaDevice::idle() {
  select();
  for (cudaStream_t st : streams_) {
    const cudaError_t err = cudaStreamQuery(st);
    if (err == cudaErrorNotReady) return false;
    cuda_check(err, "cudaStreamQuery");
  }
  return true;
}

float CudaDevice::elapsed_ms(int from, int to) {
  select();
  float ms = 0;
  MOESIM_CUDA(cudaEventElapsedTime(&ms, events_.at(static_cast<std::size_t>(from)), events_.at(static_cast<std::size_t>(to))));
  return ms;
}

void* CudaDevice::alloc_device(std::int64_t bytes, const char* what) {
  select();
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<std::size_t>(bytes > 0 ? bytes : 1));
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    std::size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    throw InputError(std::string("out of device memory for ") + what + " on " + name() + ": requested " +
                     std::to_string(bytes) + " bytes, " + std::to_string(free_bytes) + " of " + std::to_string(total) +
                     " bytes free");
  }
  cuda_check(err, "cudaMalloc");
  return p;
}

void* CudaDevice::alloc_pinned(std::int64_t bytes, const char* what) {
  select();
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, static_cast<std::size_t>(bytes > 0 ? bytes : 1));
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw InputError(std::string("cannot pin ") + std::to_string(bytes) + " bytes of host memory for " + what + ": " +
                     cudaGetErrorString(err));
  }
  return p;
}

void CudaDevice::free_device(void* p) {
  select();
  MOESIM_CUDA(cudaFree(p));
}

void CudaDevice::free_pinned(void* p) {
  select();
  MOESIM_CUDA(cudaFreeHost(p));
}

std::int64_t CudaDevice::library_workspace_bytes() const {
  return static_cast<std::int64_t>(workspaces_.size()) * kCublasWorkspaceBytes;
}

void CudaDevice::copy(void* dst, const void* src, std::int64_t bytes, int stream) {
  select();
  MOESIM_CUDA(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDefault, s(stream)));
}

void CudaDevice::copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch,
                         std::int64_t width, std::int64_t rows, int stream) {
  select();
  MOESIM_CUDA(cudaMemcpy2DAsync(dst, static_cast<std::size_t>(dst_pitch), src, static_cast<std::size_t>(src_pitch),
                                static_cast<std::size_t>(width), static_cast<std::size_t>(rows), cudaMemcpyDefault,
                                s(stream)));
}

void CudaDevice::zero(void* dst, std::int64_t bytes, int stream) {
  select();
  MOESIM_CUDA(cudaMemsetAsync(dst, 0, static_cast<std::size_t>(bytes), s(stream)));
}

void CudaDevice::download(void* host_dst, const void* src, std::int64_t bytes) {
  select();
  MOESIM_CUDA(cudaMemcpy(host_dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDefault));
}

cublasHandle_t CudaDevice::handle_for(int stream) {
  const auto it = handles_.find(stream);
  if (it != handles_.end()) return it->second;
  cublasHandle_t h = nullptr;
  cublas_check(cublasCreate(&h), "cublasCreate");
  // bf16 / fp16 GEMMs accumulate in fp32 (device.h) also across split-K partial sums, which
  // cuBLAS may otherwise reduce in the output type.
  cublas_check(cublasSetMathMode(h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                               CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
               "cublasSetMathMode");
  // The stream first: cublasSetStream resets the handle's workspace to cuBLAS's default pool, so
  // the workspace set before it would go unused (and uncounted).
  cublas_check(cublasSetStream(h, s(stream)), "cublasSetStream");
  void* ws = alloc_device(kCublasWorkspaceBytes, "the cuBLAS workspace");
  workspaces_.push_back(ws);
  cublas_check(cublasSetWorkspace(h, ws, static_cast<std::size_t>(kCublasWorkspaceBytes)), "cublasSetWorkspace");
  handles_.emplace(stream, h);
  return h;
}

void CudaDevice::gemm(const GemmArgs& g, int stream) {
  select();
  if (g.math == GemmMath::kTf32) {
    const std::string why = tf32_unsupported(compute_major_, compute_minor_, name_);
    if (!why.empty()) throw InputError(why);
  }
  cublasHandle_t h = handle_for(stream);
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: a row-major matrix with row
  // stride ld is its transpose in column-major with the same ld, so B comes first and m, n swap.
  const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
  cublas_check(cublasGemmStridedBatchedEx(h, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k), &alpha,
                                          g.b, data_type(g.ab_type), static_cast<int>(g.ldb), g.stride_b, g.a,
                                          data_type(g.ab_type), static_cast<int>(g.lda), g.stride_a, &beta, g.c,
                                          data_type(g.c_type), static_cast<int>(g.ldc), g.stride_c,
                                          static_cast<int>(g.batch), compute_type(g.math), CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

void CudaDevice::fill(const FillArgs& a, int st) { select(); cuda::fill(a, s(st)); }
void CudaDevice::add(const AddArgs& a, int st) { select(); cuda::add(a, s(st)); }
void CudaDevice::route(const RouteArgs& a, int st) { select(); cuda::route(a, s(st)); }
std::int64_t CudaDevice::assign_scratch_bytes(std::int64_t tokens, int top_k, int experts) {
  select();
  return cuda::assign_scratch_bytes(tokens, top_k, experts);
}
void CudaDevice::assign(const AssignArgs& a, int st) { select(); cuda::assign(a, s(st)); }
void CudaDevice::encode(const EncodeArgs& a, int st) { select(); cuda::encode(a, s(st)); }
void CudaDevice::activation(const ActivationArgs& a, int st) { select(); cuda::activation(a, s(st)); }
void CudaDevice::activation_backward(const ActivationBackwardArgs& a, int st) { select(); cuda::activation_backward(a, s(st)); }
void CudaDevice::decode(const DecodeArgs& a, int st) { select(); cuda::decode(a, s(st)); }
void CudaDevice::decode_backward(const DecodeBackwardArgs& a, int st) { select(); cuda::decode_backward(a, s(st)); }
void CudaDevice::encode_backward(const EncodeBackwardArgs& a, int st) { select(); cuda::encode_backward(a, s(st)); }
void CudaDevice::route_backward(const RouteBackwardArgs& a, int st) { select(); cuda::route_backward(a, s(st)); }

namespace {

class CudaProvider final : public DeviceProvider {
 public:
  CudaProvider() : probe_(probe_gpus()) {}
  std::string unavailable_reason() const override { return probe_.gpus.empty() ? probe_.no_gpu_reason : ""; }
  int num_devices() const override { return static_cast<int>(probe_.gpus.size()); }
  std::string describe(int ordinal) const override {
    const GpuInfo& g = probe_.gpus.at(static_cast<std::size_t>(ordinal));
    return g.name + ", " + std::to_string(g.total_memory_bytes >> 20) + " MiB, sm_" +
           std::to_string(g.compute_capability_major) + std::to_string(g.compute_capability_minor) + ", CUDA runtime " +
           std::to_string(probe_.runtime_version);
  }
  // The UUID: unique across hosts (two nodes with the same hostname and the same PCI layout are
  // still told apart), and the same for two processes given one GPU.
  std::string identity(int ordinal) const override {
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
    static const char* hex = "0123456789abcdef";
    std::string id = "GPU-";
    for (int i = 0; i < 16; ++i) {
      const auto b = static_cast<unsigned char>(prop.uuid.bytes[i]);
      id += hex[b >> 4];
      id += hex[b & 15];
    }
    return id;
  }
  std::unique_ptr<DeviceOps> open(int ordinal) override { return std::make_unique<CudaDevice>(ordinal); }
  std::unique_ptr<Transport> multi_device_transport(const std::vector<DeviceOps*>& devices) override {
#if MOESIM_HAVE_NCCL
    return make_nccl_transport(devices);
#else
    (void)devices;
    throw InputError("this build has no NCCL: several GPUs need it (use --loopback to run the ranks on one GPU)");
#endif
  }
  std::unique_ptr<Transport> process_transport(DeviceOps* device, ProcessGroup& group) override {
#if MOESIM_HAVE_NCCL
    return make_nccl_transport(device, group);
#else
    (void)device;
    (void)group;
    throw InputError("this build has no NCCL: one process per GPU under mpirun needs it");
#endif
  }

 private:
  GpuProbe probe_;
};

}  // namespace

std::unique_ptr<DeviceProvider> make_cuda_provider() { return std::make_unique<CudaProvider>(); }

}  // namespace moesim::runtime
