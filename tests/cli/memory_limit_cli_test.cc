// --memory-limit on every command that simulates: a run whose estimated memory exceeds it stops
// before any work with exit 2, the estimate and the flag; `none` lifts it; a bad value is named.
#include <string>

#include "tests/cli/cli_fixture.h"

namespace moesim::cli_test {
namespace {

// Zipf routing simulates every rank of the 64-GPU cluster: about 1,000 tasks, well over 64 KiB.
const std::string kEveryRank =
    "--model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml --tokens 2048 "
    "--chunks 2 --routing zipf:1.2";

void expect_over_limit(const Result& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: " + what + " would need about"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tasks on 64 simulated rank(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("more than --memory-limit 64 KiB"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");  // stopped before any report
}

TEST_F(Cli, AnEstimateOverTheMemoryLimitStopsEveryCommandBeforeWork) {
  expect_over_limit(run("simulate " + kEveryRank + " --memory-limit 64K"), "the simulation");
  expect_over_limit(run("graph export " + kEveryRank + " --memory-limit 64K -o " + (dir_ / "g.json").string()),
                    "the graph");
  EXPECT_FALSE(fs::exists(dir_ / "g.json"));
  expect_over_limit(run("plan " + kEveryRank + " --strategies none --memory-limit 64K"), "the plan");
  expect_over_limit(run("sweep --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
                        "--gpus 64 --tokens 2048 --chunks 2 --routing zipf:1.2 --strategies none --memory-limit 64K"),
                    "configuration 1 of the sweep (the largest; 2048 tokens per GPU on 64 GPUs)");
}

TEST_F(Cli, NoneLiftsTheMemoryLimitAndTheDefaultIsHalfTheMachine) {
  EXPECT_EQ(run("simulate " + kEveryRank + " --memory-limit none").exit_code, 0);
  EXPECT_EQ(run("simulate " + kEveryRank).exit_code, 0);  // a few MB against half of this machine
  EXPECT_EQ(run("simulate " + kEveryRank + " --memory-limit 1G").exit_code, 0);
}

TEST_F(Cli, ABadMemoryLimitNamesTheFlag) {
  for (const char* bad : {"12X", "-1G", "0", "lots"}) {
    const Result r = run(kQuickSimulate + " --memory-limit " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--memory-limit"), std::string::npos) << bad << ": " << r.err;
  }
}

}  // namespace
}  // namespace moesim::cli_test
