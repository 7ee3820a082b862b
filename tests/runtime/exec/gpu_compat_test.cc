// Which GPUs a build's architecture list runs on (runtime/exec/gpu_compat.h), and the TF32 rule:
// checked when a GPU is opened or asked for a TF32 GEMM, so a mismatch is an input error.
#include "runtime/exec/gpu_compat.h"

#include <gtest/gtest.h>

#include <string>

namespace moesim::runtime {
namespace {

bool runs(const std::string& archs, int major, int minor) { return architecture_mismatch(archs, major, minor, "GPU 0").empty(); }

TEST(GpuCompat, DefaultArchitecturesRunOnAmpereHopperAndLaterButNotVolta) {
  for (const char* archs : {"80;90", "80,90"}) {
    EXPECT_TRUE(runs(archs, 8, 0)) << archs;
    EXPECT_TRUE(runs(archs, 8, 6)) << archs;   // sm_80 machine code runs on later minors of 8
    EXPECT_TRUE(runs(archs, 8, 9)) << archs;
    EXPECT_TRUE(runs(archs, 9, 0)) << archs;
    EXPECT_TRUE(runs(archs, 10, 0)) << archs;  // compute_90 PTX, compiled by the driver
    EXPECT_FALSE(runs(archs, 7, 5)) << archs;
    EXPECT_FALSE(runs(archs, 7, 0)) << archs;
  }
  const std::string volta = architecture_mismatch("80;90", 7, 0, "GPU 1 (Tesla V100-SXM2-16GB)");
  EXPECT_NE(volta.find("GPU 1 (Tesla V100-SXM2-16GB) is sm_70"), std::string::npos) << volta;
  EXPECT_NE(volta.find("CMAKE_CUDA_ARCHITECTURES 80;90"), std::string::npos) << volta;
  EXPECT_NE(volta.find("-DCMAKE_CUDA_ARCHITECTURES=70"), std::string::npos) << volta;
  EXPECT_NE(volta.find("build with CUDA 12"), std::string::npos) << volta;
  const std::string turing = architecture_mismatch("80;90", 7, 5, "GPU 0 (Tesla T4)");
  EXPECT_NE(turing.find("-DCMAKE_CUDA_ARCHITECTURES=75"), std::string::npos) << turing;
  EXPECT_EQ(turing.find("CUDA 12"), std::string::npos) << turing;
}

TEST(GpuCompat, MachineCodeOnlyPtxOnlyAndArchitectureSpecificEntries) {
  EXPECT_TRUE(runs("80-real", 8, 6));
  EXPECT_FALSE(runs("80-real", 9, 0));  // no PTX to compile for Hopper
  EXPECT_TRUE(runs("90-virtual", 9, 0));
  EXPECT_TRUE(runs("90-virtual", 12, 0));
  EXPECT_FALSE(runs("90-virtual", 8, 9));
  EXPECT_TRUE(runs("90a", 9, 0));
  EXPECT_FALSE(runs("90a", 10, 0));  // wgmma code: Hopper only
  EXPECT_TRUE(runs("100f", 10, 3));
  EXPECT_TRUE(runs("70;80-real", 7, 0));
  EXPECT_TRUE(runs("70-real;90a", 7, 2));
  EXPECT_FALSE(runs("70-real;90a", 8, 0));
}

TEST(GpuCompat, ListsThatCannotBeJudgedAreNotRefused) {
  EXPECT_TRUE(runs("all", 7, 0));
  EXPECT_TRUE(runs("all-major", 7, 0));
  EXPECT_TRUE(runs("native", 7, 0));
  EXPECT_TRUE(runs("", 7, 0));
  EXPECT_TRUE(runs("80;native", 7, 0));
}

TEST(GpuCompat, Tf32NeedsAmpereOrLater) {
  EXPECT_EQ(tf32_unsupported(8, 0, "GPU 0"), "");
  EXPECT_EQ(tf32_unsupported(9, 0, "GPU 0"), "");
  const std::string v100 = tf32_unsupported(7, 0, "Tesla V100-SXM2-16GB (GPU 0)");
  EXPECT_NE(v100.find("Tesla V100-SXM2-16GB (GPU 0) is sm_70"), std::string::npos) << v100;
  EXPECT_NE(v100.find("--dtype fp32"), std::string::npos) << v100;
}

}  // namespace
}  // namespace moesim::runtime
