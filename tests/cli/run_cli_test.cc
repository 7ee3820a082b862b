// `moesim run`: without the GPU runtime (MOESIM_WITH_CUDA=OFF) it says so and exits 2; with it but
// without a usable GPU (a CI machine with CUDA and no driver) it names the reason and exits 2.
#include <gtest/gtest.h>

#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

const std::string kArgs =
    "run --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml --tokens 256 "
    "--chunks 2 --iters 1 --warmup 0";
const std::string kRun = kArgs + " --strategy s1";

TEST_F(Cli, RunWithoutAGpuExitsTwoWithTheReason) {
  const Result r = run(kRun);
#if MOESIM_CLI_HAVE_CUDA
  if (r.exit_code == 0) GTEST_SKIP() << "a GPU is present; this test covers machines without one";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: `moesim run` needs a GPU, and none is usable: "), std::string::npos) << r.err;
#else
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: this build of moesim has no GPU runtime"), std::string::npos) << r.err;
#endif
}

TEST_F(Cli, RunChecksItsInputBeforeLookingForAGpu) {
  const Result r = run(kArgs + " --strategy s9");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--strategy: unknown value 's9'; valid values: none, s1, s2, s3, s4"), std::string::npos) << r.err;
  EXPECT_EQ(run("run --help").exit_code, 0);
  const Result layers = run(kRun + " --layers 0");
  EXPECT_EQ(layers.exit_code, 2);
  EXPECT_NE(layers.err.find("error: --layers: 0 is outside [1, 100000]"), std::string::npos) << layers.err;
}

// A loopback node file describes virtual ranks; without --loopback there is nothing to run it on.
// With --loopback the sizes are those of the ranks on one GPU, not of the file's GPU count.
TEST_F(Cli, RunOnALoopbackNodeNeedsLoopback) {
  const std::string layer = "run --model models/moe-gpt-s-64e.yaml --tokens 256 --chunks 2 --iters 1 --warmup 0";
  const Result r = run(layer + " --hardware hardware/nodes/h100-loopback-8.yaml --ranks 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("h100-loopback-8.yaml:6:1: hardware H100 loopback x8 is a loopback node"), std::string::npos)
      << r.err;
  // 16 ranks on the one H100 of an 8-GPU node file: past the input checks (to the GPU or build).
  const Result sixteen = run(layer + " --hardware hardware/nodes/hgx-h100.yaml --ranks 16 --loopback");
  EXPECT_EQ(sixteen.exit_code, 2);
  EXPECT_TRUE(sixteen.err.find("no GPU runtime") != std::string::npos ||
              sixteen.err.find("needs a GPU") != std::string::npos)
      << sixteen.err;
}

}  // namespace
