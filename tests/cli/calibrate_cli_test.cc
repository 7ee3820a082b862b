// `moesim calibrate`: its input is checked before any GPU is looked for; without the GPU runtime,
// or without a usable GPU, it says so and exits 2. (The measurement itself is tested on a
// modelled device in tests/runtime/bench, and run on a GPU by validate/gpu_session.sh.)
#include <gtest/gtest.h>

#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

TEST_F(Cli, CalibrateWithoutAGpuExitsTwoWithTheReason) {
  const Result r = run("calibrate --hardware hardware/nodes/hgx-h100.yaml --out " + (dir_ / "c.yaml").string());
#if MOESIM_CLI_HAVE_CUDA
  if (r.exit_code == 0) GTEST_SKIP() << "a GPU is present; this test covers machines without one";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: `moesim calibrate` needs a GPU, and none is usable: "), std::string::npos) << r.err;
#else
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: this build of moesim has no GPU runtime"), std::string::npos) << r.err;
#endif
}

TEST_F(Cli, CalibrateChecksItsInputBeforeLookingForAGpu) {
  const std::string base = "calibrate --hardware hardware/nodes/hgx-h100.yaml --out " + (dir_ / "c.yaml").string();
  struct Case {
    std::string args;
    std::string expect;
  };
  const Case cases[] = {
      {base + " --dtypes int8", "--dtypes: 'int8' is not a dtype"},
      {"calibrate --hardware hardware/nodes/dgx-1-v100.yaml --out x.yaml --dtypes bf16",
       "GPU 'V100-SXM2-16GB' (hardware/nodes/../gpus/v100-sxm2-16gb.yaml:4:1) has no peak_flops for bf16"},
      {base + " --dims 64,32", "--dims must be strictly increasing; 32 follows 64"},
      {base + " --dims 0,32", "--dims"},
      {base + " --copy-size 12", "--copy-size must be at least 1K"},
      {base + " --min-time-ms 0", "--min-time-ms must be in (0, 10000]"},
      {base + " --device -1", "--device must be a GPU ordinal >= 0"},
      {"calibrate --hardware hardware/nodes/nope.yaml --out x.yaml", "nope.yaml"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
  EXPECT_EQ(run("calibrate --help").exit_code, 0);
  EXPECT_EQ(run("calibrate --hardware hardware/nodes/hgx-h100.yaml").exit_code, 2);  // --out is required
}

}  // namespace
