// CudaDevice: DeviceOps on one GPU (CUDA runtime, cuBLAS, moe_kernels). Exposed to other .cu
// files (the NCCL transport needs the native streams); everything else uses DeviceOps.
//
// Every call first selects the device (one process may drive several GPUs). GEMMs use one cuBLAS
// handle per stream, each with its own workspace: cuBLAS requires that a workspace is not used by
// two streams at once, and loopback ranks run their compute streams concurrently.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/exec/device.h"

namespace moesim::runtime {

// Throws InternalError naming the call when a CUDA runtime call fails.
void cuda_check(cudaError_t err, const char* call);

class CudaDevice final : public DeviceOps {
 public:
  explicit CudaDevice(int ordinal);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  int ordinal() const { return ordinal_; }
  cudaStream_t native_stream(int stream) const { return streams_.at(static_cast<std::size_t>(stream)); }
  // Whether every stream has finished its work (cudaStreamQuery), for watchdogs.
  bool idle();

  std::string name() const override;
  int create_stream() override;
  int create_event(bool timing) override;
  void record(int event, int stream) override;
  void wait(int stream, int event) override;
  void synchronize() override;
  float elapsed_ms(int from, int to) override;
  void* alloc_device(std::int64_t bytes, const char* what) override;
  void* alloc_pinned(std::int64_t bytes, const char* what) override;
  void free_device(void* p) override;
  void free_pinned(void* p) override;
  std::int64_t library_workspace_bytes() const override;
  void copy(void* dst, const void* src, std::int64_t bytes, int stream) override;
  void copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch, std::int64_t width,
               std::int64_t rows, int stream) override;
  void zero(void* dst, std::int64_t bytes, int stream) override;
  void download(void* host_dst, const void* src, std::int64_t bytes) override;
  void gemm(const GemmArgs& args, int stream) override;
  void fill(const FillArgs& args, int stream) override;
  void add(const AddArgs& args, int stream) override;
  void route(const RouteArgs& args, int stream) override;
  std::int64_t assign_scratch_bytes(std::int64_t tokens, int top_k, int experts) override;
  void assign(const AssignArgs& args, int stream) override;
  void encode(const EncodeArgs& args, int stream) override;
  void activation(const ActivationArgs& args, int stream) override;
  void activation_backward(const ActivationBackwardArgs& args, int stream) override;
  void decode(const DecodeArgs& args, int stream) override;
  void decode_backward(const DecodeBackwardArgs& args, int stream) override;
  void encode_backward(const EncodeBackwardArgs& args, int stream) override;
  void route_backward(const RouteBackwardArgs& args, int stream) override;

  static constexpr std::int64_t kCublasWorkspaceBytes = 32ll << 20;  // cuBLAS's recommendation for Hopper

 private:
  void select() const;
  cudaStream_t s(int stream) const { return native_stream(stream); }
  cublasHandle_t handle_for(int stream);

  int ordinal_;
  std::string name_;  // "<name> (GPU <ordinal>)"
  int compute_major_ = 0, compute_minor_ = 0;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  std::map<int, cublasHandle_t> handles_;  // per stream
  std::vector<void*> workspaces_;
};

}  // namespace moesim::runtime
