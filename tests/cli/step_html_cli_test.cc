// `moesim simulate --global-batch N --html FILE`: the whole step's HTML report from the command
// line: written beside the JSON with the same numbers, on stdout with the summary moved to stderr,
// its path checked before the simulation, and refused without --global-batch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

const std::string kStep =
    "simulate --model gpt-1.7b --hardware dgx-a100-80gb-hdr --gpus 16 --tp 2 --pp 4 --global-batch 16 --seq 1024";

TEST_F(Cli, StepHtmlIsWrittenWithTheJsonsNumbers) {
  const fs::path html = dir_ / "step.html";
  const fs::path json = dir_ / "step.json";
  const Result r = run(kStep + " --html " + html.string() + " --json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("step time"), std::string::npos);  // the summary stays on stdout
  const std::string page = read_file(html);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  const auto report = nlohmann::ordered_json::parse(read_file(json));
  EXPECT_NE(page.find("title=\"" + report["step_time_s"].dump() + " s\""), std::string::npos);
  EXPECT_NE(page.find("data-plot=\"timeline\""), std::string::npos);
}

TEST_F(Cli, StepHtmlOnStdoutMovesTheSummaryToStderr) {
  const Result r = run(kStep + " --html -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(r.err.find("step time"), std::string::npos);
}

TEST_F(Cli, ABadStepHtmlPathFailsBeforeTheSimulation) {
  const std::string bad = (dir_ / "no-such-folder" / "step.html").string();
  const Result r = run(kStep + " --html " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: --html: cannot write '" + bad + "': the folder '" + (dir_ / "no-such-folder").string() +
                       "' does not exist\n");
  EXPECT_EQ(r.out, "");  // no summary: nothing was simulated
}

TEST_F(Cli, HtmlWithoutGlobalBatchIsRefused) {
  const Result r = run(kQuickSimulate + " --html " + (dir_ / "r.html").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: --html belongs to the whole training step: give --global-batch (docs/training-step.md)\n");
}

}  // namespace
