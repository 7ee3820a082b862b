// The messages of runtime/exec/gpu_compat.h: a GPU the build's code cannot run on (the driver
// decides; the message says how to build for it), TF32 below compute capability 8.0 and chunks of
// unequal size.
#include "runtime/exec/gpu_compat.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.h"
#include "sim/build/moe_graph.h"

namespace moesim::runtime {
namespace {

TEST(GpuCompat, NoKernelImageSaysHowToBuildForTheGpu) {
  const std::string volta = no_kernel_image_message("Tesla V100-SXM2-16GB (GPU 1)", 7, 0, "80,90",
                                                    "cudaErrorNoKernelImageForDevice", true);
  EXPECT_NE(volta.find("Tesla V100-SXM2-16GB (GPU 1) is sm_70"), std::string::npos) << volta;
  EXPECT_NE(volta.find("cudaErrorNoKernelImageForDevice; built for CMAKE_CUDA_ARCHITECTURES 80,90"), std::string::npos)
      << volta;
  EXPECT_NE(volta.find("-DCMAKE_CUDA_ARCHITECTURES=70 and rebuild with CUDA 12 (CUDA 13 cannot target sm_70)"),
            std::string::npos)
      << volta;
  // Built with CUDA 12 already, or a GPU CUDA 13 can target: no toolkit advice.
  EXPECT_EQ(no_kernel_image_message("V100", 7, 0, "80", "e", false).find("CUDA 12"), std::string::npos);
  const std::string turing = no_kernel_image_message("Tesla T4 (GPU 0)", 7, 5, "80,90", "e", true);
  EXPECT_NE(turing.find("-DCMAKE_CUDA_ARCHITECTURES=75 and rebuild"), std::string::npos) << turing;
  EXPECT_EQ(turing.find("CUDA 12"), std::string::npos) << turing;
  // Architectures chosen through CMAKE_CUDA_FLAGS are not in the list.
  EXPECT_NE(no_kernel_image_message("g", 7, 5, "", "e", true).find("as set in CMAKE_CUDA_FLAGS"), std::string::npos);
}

TEST(GpuCompat, Tf32NeedsAmpereOrLater) {
  EXPECT_EQ(tf32_unsupported(8, 0, "GPU 0"), "");
  EXPECT_EQ(tf32_unsupported(9, 0, "GPU 0"), "");
  const std::string v100 = tf32_unsupported(7, 0, "Tesla V100-SXM2-16GB (GPU 0)");
  EXPECT_NE(v100.find("Tesla V100-SXM2-16GB (GPU 0) is sm_70"), std::string::npos) << v100;
  EXPECT_NE(v100.find("--dtype fp32"), std::string::npos) << v100;
}

TEST(GpuCompat, UnequalChunksAreRefusedWithTheDivisorsOfTheCapacity) {
  LayerDims d;
  d.capacity = 6;
  d.num_chunks = 3;
  EXPECT_NO_THROW(check_equal_chunks(d));
  d.num_chunks = 4;
  try {
    check_equal_chunks(d);
    FAIL() << "n = 4 does not divide C = 6";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("capacity C = 6 slots per expert in n = 4 chunks (chunk_alignment 1) are not"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("use an n among 1, 2, 3, 6"), std::string::npos) << e.what();
  }
  d.capacity = 8;
  d.chunk_alignment = 3;
  d.num_chunks = 2;  // 2 blocks of 3 slots over 2 chunks, the last taking the 2 left: 3 and 5
  EXPECT_THROW(check_equal_chunks(d), InputError);
  d.chunk_alignment = 2;  // 4 blocks of 2: 4 and 4
  EXPECT_NO_THROW(check_equal_chunks(d));
}

}  // namespace
}  // namespace moesim::runtime
