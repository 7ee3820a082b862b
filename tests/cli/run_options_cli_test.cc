// The run options' table from the command line (sim/spec/run_options.h): a flag over a run file's
// value, the report's echo of every option, `moesim options`, and a bad value refused with the same
// words by simulate, plan and sweep, from a flag and from a file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

const std::string kFiles = " --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml";

TEST_F(Cli, FlagsOverrideTheRunFileAndTheReportEchoesEveryOption) {
  const fs::path file = write("run.yaml", "schema_version: 1\nkind: run\ntokens_per_gpu: 2048\nnum_chunks: 2\n"
                                          "slots: 1\nstrategy: s4\norder: sequential\n");
  const fs::path j = dir_ / "r.json";
  Result r = run("simulate --run " + file.string() + kFiles + " --slots 2 --network alpha-beta --json " + j.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto echo = nlohmann::json::parse(read_file(j))["config"]["run"];
  EXPECT_EQ(echo["tokens_per_gpu"], 2048);
  EXPECT_EQ(echo["num_chunks"], 2);
  EXPECT_EQ(echo["slots"], 2);  // the flag over the file's 1
  EXPECT_EQ(echo["strategy"], "s4");
  EXPECT_EQ(echo["order"], "sequential");
  EXPECT_EQ(echo["network"], "alpha-beta");
  EXPECT_EQ(echo["routing_data"], true);
  EXPECT_EQ(echo["ep_size"], 64);  // 0 resolved to every GPU
  Result listing = run("options");
  ASSERT_EQ(listing.exit_code, 0) << listing.err;
  for (const auto& [key, value] : echo.items())
    EXPECT_NE(listing.out.find("\n" + key + " "), std::string::npos) << key << " echoed but not listed";
  EXPECT_EQ(echo.size(), 20u);
}

TEST_F(Cli, ABooleanFlagGivenFalseSetsTheOpposite) {
  const fs::path file = write("sync.yaml", "schema_version: 1\nkind: run\ntokens_per_gpu: 2048\ngrad_sync: true\n");
  const fs::path j = dir_ / "s.json";
  Result r = run("simulate --run " + file.string() + kFiles + " --grad-sync=false --no-dtd=false --json " + j.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;  // --no-dtd=false asks for nothing, so --tp 1 is fine
  EXPECT_EQ(nlohmann::json::parse(read_file(j))["config"]["run"]["grad_sync"], false);  // over the file's true
  Result tp2 = run("simulate --run " + file.string() + kFiles + " --tp 2 --no-dtd=false --json " + j.string());
  ASSERT_EQ(tp2.exit_code, 0) << tp2.err;
  EXPECT_EQ(nlohmann::json::parse(read_file(j))["config"]["run"]["drop_duplicate_tokens"], true);
  Result off = run("simulate --run " + file.string() + kFiles + " --tp 2 --no-dtd --json " + j.string());
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(nlohmann::json::parse(read_file(j))["config"]["run"]["drop_duplicate_tokens"], false);
}

TEST_F(Cli, AWholeStepFlagGivenFalseKeepsItsMeaning) {
  const std::string step = "simulate --model tests/sim/search/data/tiny-gpt.yaml --hardware dgx-a100-80gb-hdr "
                           "--gpus 8 --global-batch 8 --tp 2 --json -";
  const auto layout = [&](const std::string& flags) {
    Result r = run(step + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["layout"] : nlohmann::json();
  };
  EXPECT_EQ(layout(" --no-overlap-grad-reduce=false")["overlap_grad_reduce"], true);
  EXPECT_EQ(layout(" --no-overlap-grad-reduce")["overlap_grad_reduce"], false);
  EXPECT_EQ(layout(" --sequence-parallel=false")["sequence_parallel"], false);
  EXPECT_EQ(layout(" --sequence-parallel")["sequence_parallel"], true);
  // Without --global-batch a whole-step flag is refused, not ignored.
  Result layer = run("simulate" + kFiles + " --tokens 4096 --overlap-moe-expert-parallel-comm");
  EXPECT_EQ(layer.exit_code, 2);
  EXPECT_NE(layer.err.find("--overlap-moe-expert-parallel-comm"), std::string::npos) << layer.err;
}

TEST_F(Cli, ABadValueGetsTheSameWordsFromEveryCommandAndFromFiles) {
  for (const std::string& cmd : {"simulate" + kFiles + " --tokens 4096", "plan" + kFiles + " --tokens 4096",
                                 "sweep" + kFiles + " --tokens 4096 --chunks 1"}) {
    Result r = run(cmd + " --order fifo");
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_NE(r.err.find("error: --order: unknown value 'fifo'; valid values: sequential, mpipemoe, fastermoe, tutel"),
              std::string::npos)
        << cmd << "\n" << r.err;
    Result slots = run(cmd + " --slots 3");
    EXPECT_EQ(slots.exit_code, 2) << cmd;
    EXPECT_NE(slots.err.find("--slots: 3 is outside [1, 2]"), std::string::npos) << cmd << "\n" << slots.err;
  }
  const fs::path file = write("bad.yaml", "schema_version: 1\nkind: run\ntokens_per_gpu: 2048\norder: fifo\n");
  Result r = run("simulate --run " + file.string() + kFiles);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(file.string() + ":4:8: order: unknown value 'fifo'; valid values: sequential, mpipemoe, "
                                       "fastermoe, tutel"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, SweepTakesEveryFixedRunOptionAsAFlag) {
  const std::string sweep = "sweep" + kFiles + " --tokens 4096 --chunks 2 --strategies s4 --json -";
  Result two = run(sweep), one = run(sweep + " --slots 1");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto a = nlohmann::json::parse(two.out)["records"][0], b = nlohmann::json::parse(one.out)["records"][0];
  // One slot per reused tensor instead of two: less memory, never faster.
  EXPECT_LT(b["peak_bytes"].get<double>(), a["peak_bytes"].get<double>()) << a << "\n" << b;
  EXPECT_GE(b["step_ns"].get<double>(), a["step_ns"].get<double>());
}

}  // namespace
