// Finding out whether GPUs can be used, without failing where there are none.
//
// cudaGetDeviceCount returns an error without a driver (35), with only a stub libcuda (34), or with
// a driver but no device (100); every such case is "no GPU" with a readable reason, and the error
// is cleared so later CUDA calls start clean.
#pragma once

#include <string>
#include <vector>

namespace moesim::runtime {

struct GpuInfo {
  int index = 0;
  std::string name;
  long long total_memory_bytes = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int multiprocessors = 0;
};

struct GpuProbe {
  std::vector<GpuInfo> gpus;
  std::string no_gpu_reason;  // set when gpus is empty
  int runtime_version = 0;    // cudaRuntimeGetVersion, e.g. 13000
};

GpuProbe probe_gpus();

}  // namespace moesim::runtime
