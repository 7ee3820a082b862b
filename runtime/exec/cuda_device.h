// The CUDA implementations of DeviceOps and DeviceProvider (cuda_device.cu), behind a plain C++
// header so that code compiled without nvcc can open GPUs.
#pragma once

#include <memory>

#include "runtime/exec/device.h"

namespace moesim::runtime {

// GPUs visible to this process (probe_gpus); NCCL transport across them when built with NCCL.
std::unique_ptr<DeviceProvider> make_cuda_provider();

}  // namespace moesim::runtime
