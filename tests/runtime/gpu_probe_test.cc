// GPU tests carry the CTest label `gpu`: without a GPU they skip with the probe's reason, unless
// MOESIM_REQUIRE_GPU=1 turns the skip into a failure (set it on a GPU machine).
#include "runtime/exec/gpu_probe.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace moesim::runtime {
namespace {

bool gpu_required() {
  const char* v = std::getenv("MOESIM_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

TEST(GpuProbe, ReportsDevicesOrAReason) {
  const GpuProbe probe = probe_gpus();
  EXPECT_GT(probe.runtime_version, 0);
  if (probe.gpus.empty()) {
    EXPECT_FALSE(probe.no_gpu_reason.empty());
    if (gpu_required()) FAIL() << "MOESIM_REQUIRE_GPU=1 but no GPU: " << probe.no_gpu_reason;
    GTEST_SKIP() << "no GPU: " << probe.no_gpu_reason;
  }
  for (const GpuInfo& g : probe.gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.total_memory_bytes, 0);
    EXPECT_GE(g.compute_capability_major, 7);
    EXPECT_GT(g.multiprocessors, 0);
  }
}

}  // namespace
}  // namespace moesim::runtime
