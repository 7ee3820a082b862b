// `moesim compare`: two reports of the same layer side by side; reports of different layers,
// missing files and non-JSON files are input errors (exit 2) naming the file.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

const std::string kLayer =
    "simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/nodes/dgx-a100.yaml --tokens 2048 --chunks ";

TEST_F(Cli, CompareTwoNetworkModelsPerStageAndTask) {
  const std::string a = (dir_ / "ab.json").string(), b = (dir_ / "flow.json").string();
  ASSERT_EQ(run(kLayer + "4 --all-ranks --network alpha-beta --json " + a).exit_code, 0);
  ASSERT_EQ(run(kLayer + "4 --all-ranks --network flow --json " + b).exit_code, 0);
  const std::string csv = (dir_ / "tasks.csv").string();
  const Result r = run("compare " + a + " " + b + " --worst 3 --csv " + csv + " --json " + (dir_ / "c.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# moesim compare: reference " + a + " (alpha-beta"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fwd.dispatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("largest task differences"), std::string::npos) << r.out;
  EXPECT_EQ(read_file(csv).rfind("id,rank,stage,reference_start_us", 0), 0u);
  const auto j = nlohmann::json::parse(read_file(dir_ / "c.json"));
  const auto ref = nlohmann::json::parse(read_file(a));
  EXPECT_EQ(j["tasks"].size(), ref["tasks"].size());
  EXPECT_DOUBLE_EQ(j["step"]["reference_us"].get<double>(), ref["step_time_us"].get<double>());
}

TEST_F(Cli, CompareRejectsDifferentLayersAndBadFiles) {
  const std::string a = (dir_ / "n2.json").string(), b = (dir_ / "n4.json").string();
  ASSERT_EQ(run(kLayer + "2 --json " + a).exit_code, 0);
  ASSERT_EQ(run(kLayer + "4 --json " + b).exit_code, 0);
  Result r = run("compare " + a + " " + b);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: the reports describe different layers: config/run/num_chunks is 2 in " + a), std::string::npos)
      << r.err;
  r = run("compare " + a + " " + a + " --worst -1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: --worst: -1 is negative; it must be in [0, 1000000]"), std::string::npos) << r.err;
  r = run("compare " + a + " " + (dir_ / "missing.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot open report"), std::string::npos) << r.err;
  r = run("compare " + a + " " + write("bad.json", "{\"tasks\": [1,").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.json: not JSON"), std::string::npos) << r.err;
  // A device or FIFO would be read without end: refused before reading.
  r = run("compare " + a + " /dev/zero");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'/dev/zero' is not a regular file"), std::string::npos) << r.err;
}

TEST_F(Cli, ARoutingMatrixMustBeARegularFile) {
  const Result r = run(kQuickSimulate + " --routing matrix:/dev/zero");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'/dev/zero' is not a regular file"), std::string::npos) << r.err;
}

}  // namespace
