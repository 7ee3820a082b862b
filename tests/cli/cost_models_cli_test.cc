// The cost-model registry from the command line: `moesim cost-models` lists it, --compute (and
// the run and sweep files' compute:) pick a compute model by name as --network picks a network
// model, in simulate (both modes), plan and sweep; unknown names and unmet needs exit 2.
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/cli_fixture.h"

namespace moesim::cli_test {
namespace {

const std::string kPipeMoe =
    "simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/pipemoe-alpha-beta.yaml --tokens 2048 "
    "--chunks 2";

std::string step_line(const std::string& summary) {
  const auto at = summary.find("step time");
  return at == std::string::npos ? "" : summary.substr(at, summary.find('\n', at) - at);
}

TEST_F(Cli, CostModelsListsTheRegistry) {
  const Result all = run("cost-models");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(all.out.rfind("name ", 0), 0u) << all.out;
  for (const char* line : {"\nauto                network  -", "\nalpha-beta          network", "\nflow                network  topology",
                           "\nauto                compute", "\nroofline            compute",
                           "\npipemoe-alpha-beta  compute  alpha_beta section"})
    EXPECT_NE(all.out.find(line), std::string::npos) << line << "\n" << all.out;
  const Result compute = run("cost-models compute");
  ASSERT_EQ(compute.exit_code, 0) << compute.err;
  EXPECT_EQ(compute.out.find("flow"), std::string::npos) << compute.out;
  EXPECT_NE(compute.out.find("roofline"), std::string::npos) << compute.out;
  const Result bad = run("cost-models gpu");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("cost-models: unknown kind 'gpu'; valid: network, compute"), std::string::npos) << bad.err;
}

TEST_F(Cli, ComputeFlagPicksTheComputeModel) {
  const Result by_file = run(kPipeMoe), pipemoe = run(kPipeMoe + " --compute pipemoe-alpha-beta"),
               roofline = run(kPipeMoe + " --compute roofline");
  ASSERT_EQ(by_file.exit_code, 0) << by_file.err;
  ASSERT_EQ(pipemoe.exit_code, 0) << pipemoe.err;
  ASSERT_EQ(roofline.exit_code, 0) << roofline.err;
  EXPECT_NE(by_file.out.find("pure alpha-beta costs (hardware alpha_beta.simulate)"), std::string::npos);
  EXPECT_NE(pipemoe.out.find("pure alpha-beta costs (compute pipemoe-alpha-beta)"), std::string::npos);
  EXPECT_EQ(step_line(by_file.out), step_line(pipemoe.out));
  EXPECT_EQ(roofline.out.find("pure alpha-beta"), std::string::npos) << roofline.out;
  EXPECT_NE(step_line(by_file.out), step_line(roofline.out));

  const Result bad = run(kQuickSimulate + " --compute fast");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--compute: unknown value 'fast'; valid values: auto, roofline, pipemoe-alpha-beta"),
            std::string::npos)
      << bad.err;
  const Result unmet = run(kQuickSimulate + " --compute pipemoe-alpha-beta");
  EXPECT_EQ(unmet.exit_code, 2);
  EXPECT_NE(unmet.err.find("adira-8x-dgx-a100.yaml"), std::string::npos) << unmet.err;
  EXPECT_NE(unmet.err.find("needs the hardware's alpha_beta section"), std::string::npos) << unmet.err;
}

TEST_F(Cli, RunFileTakesTheComputeKey) {
  const fs::path good = write("run.yaml", "schema_version: 1\nkind: run\nmodel: " + std::string(MOESIM_SOURCE_DIR) +
                                              "/models/moe-gpt-s-64e.yaml\nhardware: " + MOESIM_SOURCE_DIR +
                                              "/hardware/clusters/pipemoe-alpha-beta.yaml\ntokens_per_gpu: 2048\n"
                                              "num_chunks: 2\ncompute: roofline\n");
  const Result r = run("simulate --run " + good.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(step_line(r.out), step_line(run(kPipeMoe + " --compute roofline").out));
  EXPECT_EQ(r.out.find("pure alpha-beta"), std::string::npos) << r.out;
  // The flag wins over the file.
  EXPECT_NE(run("simulate --run " + good.string() + " --compute auto").out.find("pure alpha-beta"), std::string::npos);

  std::string text = read_file(good);
  text.replace(text.find("compute: roofline"), 17, "compute: fast");
  const fs::path bad = write("bad.yaml", text);
  const Result b = run("simulate --run " + bad.string());
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find("bad.yaml:7"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("roofline"), std::string::npos) << b.err;
}

TEST_F(Cli, PlanSweepAndTheWholeStepTakeCompute) {
  const Result plan = run(kQuickPlan + " --method simulate --compute roofline"), auto_plan = run(kQuickPlan + " --method simulate");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  ASSERT_EQ(auto_plan.exit_code, 0) << auto_plan.err;
  EXPECT_NE(plan.out, auto_plan.out);
  EXPECT_EQ(run(kQuickPlan + " --compute fast").exit_code, 2);

  const Result sweep = run(kQuickSweep + " --compute pipemoe-alpha-beta");
  EXPECT_EQ(sweep.exit_code, 2);
  EXPECT_NE(sweep.err.find("alpha_beta section"), std::string::npos) << sweep.err;
  ASSERT_EQ(run(kQuickSweep + " --compute roofline").exit_code, 0);

  const std::string step = "simulate --model tests/sim/search/data/tiny-gpt.yaml --hardware "
                           "hardware/clusters/pipemoe-alpha-beta.yaml --global-batch 8";
  const Result by_file = run(step), roofline = run(step + " --compute roofline");
  ASSERT_EQ(by_file.exit_code, 0) << by_file.err;
  ASSERT_EQ(roofline.exit_code, 0) << roofline.err;
  EXPECT_NE(by_file.out, roofline.out);  // (a step of 2 ms either way: the throughput moves)
  EXPECT_EQ(run(step + " --compute fast").exit_code, 2);
}

}  // namespace
}  // namespace moesim::cli_test
