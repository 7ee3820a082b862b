// GPU names from measurements against the presets' (gpu_identity.h): the chip and, where both
// give one, the memory size must agree; vendor prefixes, form factors and HBM generations are not
// compared.
#include "sim/spec/gpu_identity.h"

#include <gtest/gtest.h>

namespace moesim {
namespace {

TEST(GpuIdentity, ReadsTheChipAndTheMemorySize) {
  const GpuIdentity h100 = identify_gpu("NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.chip, "H100");
  EXPECT_EQ(h100.memory_gb, 80);
  const GpuIdentity v100 = identify_gpu("Tesla V100-SXM2-16GB");
  EXPECT_EQ(v100.chip, "V100");
  EXPECT_EQ(v100.memory_gb, 16);
  EXPECT_EQ(identify_gpu("H200-SXM-141GB").memory_gb, 141);
  const GpuIdentity bare = identify_gpu("NVIDIA H200");
  EXPECT_EQ(bare.chip, "H200");
  EXPECT_FALSE(bare.memory_gb);
  EXPECT_EQ(identify_gpu("a100-sxm4-40gb").chip, "A100");  // case does not matter
  EXPECT_EQ(identify_gpu("Quadro RTX").chip, "");          // SXM5, HBM3, RTX are no chips
}

TEST(GpuIdentity, TheSameGpuSpelledTwoWaysMatches) {
  EXPECT_EQ(gpu_mismatch("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"), "");
  EXPECT_EQ(gpu_mismatch("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"), "");
  EXPECT_EQ(gpu_mismatch("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"), "");
  EXPECT_EQ(gpu_mismatch("NVIDIA H200", "H200-SXM-141GB"), "");  // no size on one side: chip alone
}

TEST(GpuIdentity, AnotherChipOrMemorySizeIsAMismatch) {
  EXPECT_EQ(gpu_mismatch("NVIDIA H100 80GB HBM3", "A100-SXM4-80GB"), "chip H100 is not A100");
  EXPECT_EQ(gpu_mismatch("NVIDIA A100-SXM4-80GB", "A100-SXM4-40GB"), "80 GB is not 40 GB");
  EXPECT_NE(gpu_mismatch("Some GPU", "H100-SXM5-80GB"), "");  // nothing to check is not a match
}

}  // namespace
}  // namespace moesim
