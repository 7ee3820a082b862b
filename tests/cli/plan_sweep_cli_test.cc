// End-to-end tests of `moesim plan` and `moesim sweep`: outputs, determinism across --jobs, and bad
// grids failing with exit 2 before any work.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

const std::string kPlan =
    "plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/pipemoe-alpha-beta.yaml --tokens 4096 "
    "--strategies none,s4 --chunks 1-8";

TEST_F(Cli, PlanPrintsARankedTableAndEveryMethod) {
  const Result r = run(kPlan + " --method all");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# moesim"), std::string::npos);
  EXPECT_NE(r.out.find("<- best"), std::string::npos);
  for (const char* m : {"simulate", "pipemoe", "mpipemoe-online", "mpmoe-model"}) {
    EXPECT_NE(r.out.find(std::string("  ") + m), std::string::npos) << m;
  }
  EXPECT_NE(r.out.find("alpha_beta section"), std::string::npos);
  EXPECT_NE(r.out.find("final ranges"), std::string::npos);
}

TEST_F(Cli, PlanJsonMatchesTheTable) {
  const Result r = run(kPlan + " --objective memory --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["objective"], "memory");
  const auto& rows = j["tables"][0]["rows"];
  EXPECT_EQ(rows.size(), 16u);
  // Ranked by peak memory among those that fit.
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (rows[i]["fits"] && rows[i - 1]["fits"]) {
      EXPECT_LE(rows[i - 1]["peak_bytes"], rows[i]["peak_bytes"]);
    }
  }
  EXPECT_EQ(j["tables"][0]["best"], rows[0]);
  EXPECT_NE(r.err.find("<- best"), std::string::npos);  // the table moved to stderr
}

TEST_F(Cli, PlanFitFindsTheSmallestCluster) {
  const Result r = run(
      "plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml --tokens 4096 "
      "--chunks 1,2,4 --strategies none --fit --max-nodes 4 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fit"]["answer_nodes"], 1);  // GPT-S fits in one DGX A100
  EXPECT_NE(r.err.find("answer: 1 node(s), 8 GPUs"), std::string::npos) << r.err;
}

TEST_F(Cli, PlanBadInputExitsTwo) {
  Result r = run(kPlan + " --objective speed");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("valid: time, memory, balanced"), std::string::npos) << r.err;
  r = run("plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml --tokens 256 "
          "--chunks 1-8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("n = 5"), std::string::npos) << r.err;
}

const std::string kSweep =
    "sweep --model models/moe-gpt-s-64e.yaml,models/moe-bert-l-64e.yaml --hardware "
    "hardware/clusters/dgx-a100-2node.yaml --gpus 8,16 --tokens 2048,4096 --chunks 1-4 --strategies none,s4";

TEST_F(Cli, SweepCsvIsByteIdenticalAcrossJobs) {
  const fs::path a = dir_ / "j1.csv", b = dir_ / "j2.csv";
  const Result r1 = run(kSweep + " --jobs 1 --csv " + a.string());
  const Result r2 = run(kSweep + " --jobs 2 --csv " + b.string());
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  const std::string csv = read_file(a);
  EXPECT_EQ(csv, read_file(b));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 2 * 2 * 4 * 2);
  EXPECT_EQ(csv.rfind("model,hardware,gpus,tokens,routing,strategy,n,", 0), 0u);
  // Not a terminal: plain progress lines on stderr, nothing on stdout.
  EXPECT_NE(r1.err.find("sweep: 64/64 configurations (100%)"), std::string::npos) << r1.err;
  EXPECT_TRUE(r1.out.empty());
}

TEST_F(Cli, SweepWritesJsonAndSelfContainedHtml) {
  const fs::path json = dir_ / "s.json", html = dir_ / "s.html";
  const Result r = run(kSweep + " --step-target-ms 5 --json " + json.string() + " --html " + html.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(j["records"].size(), 64u);
  EXPECT_EQ(j["step_target_ns"], 5000000);
  const std::string page = read_file(html);
  for (const char* must : {"<svg", "Pareto front", "Best n against token count", "Capacity"}) {
    EXPECT_NE(page.find(must), std::string::npos) << must;
  }
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);  // nothing fetched from a network
}

TEST_F(Cli, BadGridsFailBeforeAnyWork) {
  const std::string head = "schema_version: 1\nkind: sweep\nmodels: [" + std::string(MOESIM_SOURCE_DIR) +
                           "/models/moe-gpt-s-64e.yaml]\nhardware: [" + MOESIM_SOURCE_DIR +
                           "/hardware/clusters/dgx-a100-2node.yaml]\n";
  struct Case {
    std::string body;
    std::string expect;
  };
  const Case cases[] = {
      {"tokens: []\nchunks: [1]\nstrategies: [none]\n", "g.yaml:5:9: tokens: the axis 'tokens' is empty"},
      {"tokens: [256]\nchunks: [1, 8]\nstrategies: [none]\n", "g.yaml:6:9: n = 8 is above the capacity C = 4"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nroutng: [uniform]\n", "did you mean 'routing'"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nrouting: [zipf]\n",
       "g.yaml:8:11: routing 'zipf' needs an exponent, e.g. zipf:1.2"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nrouting: [uniform, lognormal]\n",
       "g.yaml:8:20: unknown routing 'lognormal'; valid: uniform, zipf:<s>"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nrouting: [matrix:absent.csv]\n",
       "cannot open routing matrix file"},
      // 2 rows for a 16-rank group: found when the grid is checked, before any configuration runs.
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nrouting: [matrix:two-rows.csv]\n",
       "two-rows.csv:3: routing matrix has 2 rows; it needs 1 (every rank alike) or 16"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\ngpus: [12]\n", "not a multiple of the 8 GPUs per node"},
  };
  std::string two_rows;
  for (int row = 0; row < 2; ++row) {
    for (int e = 0; e < 64; ++e) two_rows += (e ? "," : "") + std::to_string(e % 3);
    two_rows += "\n";
  }
  write("two-rows.csv", "# tokens per expert\n" + two_rows);
  for (const Case& c : cases) {
    const fs::path grid = write("g.yaml", head + c.body);
    const Result r = run("sweep --grid " + grid.string() + " --csv " + (dir_ / "out.csv").string());
    EXPECT_EQ(r.exit_code, 2) << c.body;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("sweep: "), std::string::npos) << "work started: " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out.csv"));
  }
  const fs::path missing = write("m.yaml", "schema_version: 1\nkind: sweep\nmodels: [nope.yaml]\n");
  const Result r = run("sweep --grid " + missing.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("m.yaml:3:10: models[0]: cannot open model file"), std::string::npos) << r.err;
}

}  // namespace
