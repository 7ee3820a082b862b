// Shared by the GPU tests: skip with the probe's reason when no GPU is usable, unless
// MOESIM_REQUIRE_GPU=1 (set it on GPU machines) turns the skip into a failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "runtime/exec/gpu_probe.h"

namespace moesim::runtime::gpu_test {

inline bool gpu_required() {
  const char* v = std::getenv("MOESIM_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// Empty when a GPU is usable, else the reason.
inline std::string no_gpu_reason() {
  const GpuProbe probe = probe_gpus();
  return probe.gpus.empty() ? probe.no_gpu_reason : std::string();
}

}  // namespace moesim::runtime::gpu_test

#define MOESIM_REQUIRE_GPU_OR_SKIP()                                                          \
  do {                                                                                        \
    const std::string moesim_reason = ::moesim::runtime::gpu_test::no_gpu_reason();          \
    if (!moesim_reason.empty()) {                                                             \
      if (::moesim::runtime::gpu_test::gpu_required())                                        \
        FAIL() << "MOESIM_REQUIRE_GPU=1 but no GPU: " << moesim_reason;                       \
      GTEST_SKIP() << "no GPU: " << moesim_reason;                                            \
    }                                                                                         \
  } while (false)
