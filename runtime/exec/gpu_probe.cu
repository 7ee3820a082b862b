#include "runtime/exec/gpu_probe.h"

#include <cuda_runtime.h>

namespace moesim::runtime {

GpuProbe probe_gpus() {
  GpuProbe probe;
  cudaRuntimeGetVersion(&probe.runtime_version);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    probe.no_gpu_reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(err) + " (" +
                          cudaGetErrorString(err) + ")";
    cudaGetLastError();  // clear the error so later calls start clean
    return probe;
  }
  if (count == 0) {
    probe.no_gpu_reason = "the CUDA driver reports no device";
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    GpuInfo info;
    info.index = i;
    info.name = prop.name;
    info.total_memory_bytes = static_cast<long long>(prop.totalGlobalMem);
    info.compute_capability_major = prop.major;
    info.compute_capability_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    probe.gpus.push_back(info);
  }
  if (probe.gpus.empty()) probe.no_gpu_reason = "no device answered cudaGetDeviceProperties";
  return probe;
}

}  // namespace moesim::runtime
