// Every command's output paths: checked before any work (exit 2 naming the flag and the path),
// at most one output on stdout, no two outputs in one file, files written whole or not at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;


std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(Cli, ABadHtmlPathFailsTheSweepBeforeItRuns) {
  const std::string bad = (dir_ / "no-such-folder" / "r.html").string();
  const Result r = run("sweep --grid examples/sweep-1000.yaml --csv - --html " + bad);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "error: --html: cannot write '" + bad + "': the folder '" + (dir_ / "no-such-folder").string() +
                       "' does not exist\n");
  EXPECT_EQ(r.out, "");  // no half-written CSV, no progress: nothing was simulated
}

TEST_F(Cli, EveryCommandChecksItsOutputPathsFirst) {
  const std::string bad = (dir_ / "missing" / "out").string();
  const std::string report = (dir_ / "r.json").string();
  ASSERT_EQ(run(kQuickSimulate + " --all-ranks --json " + report).exit_code, 0);
  struct Case {
    std::string args;
    std::string flag;
  };
  const Case cases[] = {
      {kQuickSimulate + " --json " + bad, "--json"},
      {kQuickSimulate + " --trace " + bad, "--trace"},
      {kQuickSimulate + " --timeline " + bad, "--timeline"},
      {"graph export " + kQuickSimulate.substr(9) + " -o " + bad, "--output"},
      {kQuickPlan + " --json " + bad, "--json"},
      {kQuickSweep + " --csv " + bad, "--csv"},
      {kQuickSweep + " --json " + bad, "--json"},
      {"compare " + report + " " + report + " --csv " + bad, "--csv"},
      {"compare " + report + " " + report + " --json " + bad, "--json"},
      {kQuickRun + " --json " + bad, "--json"},
      {kQuickRun + " --trace " + bad, "--trace"},
      {"calibrate --hardware hardware/nodes/hgx-h100.yaml --output " + bad, "--output"},
      {"calibrate --hardware hardware/nodes/dgx-a100.yaml --alltoall-log x.log -o " + bad, "--output"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("error: " + c.flag + ": cannot write '" + bad + "': the folder", 0), 0u)
        << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

TEST_F(Cli, AFolderGivenAsTheOutputFileIsRefused) {
  const Result r = run(kQuickSimulate + " --json " + dir_.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: --json: '" + dir_.string() + "' is a folder; give a file name\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(Cli, AFileGivenAsTheOutputFolderIsNamed) {
  const fs::path file = write("plain.txt", "x");
  const Result r = run(kQuickSweep + " --csv " + (file / "r.csv").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: --csv: cannot write '" + (file / "r.csv").string() + "': '" + file.string() +
                       "' is not a folder\n");
}

TEST_F(Cli, TwoOutputsOnStdoutAreRefusedInEveryCommand) {
  const std::string report = (dir_ / "r.json").string();
  ASSERT_EQ(run(kQuickSimulate + " --all-ranks --json " + report).exit_code, 0);
  const std::string rule = " both write to stdout ('-'), where only one output can go; give the other a file name\n";
  struct Case {
    std::string args;
    std::string expect;
  };
  const Case cases[] = {
      {kQuickSimulate + " --json - --trace -", "error: --json and --trace" + rule},
      {kQuickSweep + " --csv - --json -", "error: --csv and --json" + rule},
      {kQuickSweep + " --json - --html -", "error: --json and --html" + rule},
      {"compare " + report + " " + report + " --csv - --json -", "error: --csv and --json" + rule},
      {kQuickRun + " --json - --trace -", "error: --json and --trace" + rule},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_EQ(r.err, c.expect) << c.args;
    EXPECT_EQ(r.out, "") << c.args;
  }
  const Result three = run(kQuickSimulate + " --json - --trace - --timeline -");
  EXPECT_EQ(three.err, "error: --json, --trace and --timeline all write to stdout ('-'), where only one output can "
                       "go; give the others a file name\n");
}

TEST_F(Cli, TwoOutputsNamingOneFileAreRefused) {
  const std::string same = (dir_ / "out.txt").string();
  const Result s = run(kQuickSweep + " --csv " + same + " --html " + same);
  EXPECT_EQ(s.exit_code, 2);
  EXPECT_EQ(s.err, "error: --csv and --html both write '" + same + "'; give each output its own file\n");
  const Result t = run(kQuickSimulate + " --json " + same + " --trace " + (dir_ / "." / "out.txt").string());
  EXPECT_EQ(t.exit_code, 2);
  EXPECT_NE(t.err.find("error: --json and --trace both write"), std::string::npos) << t.err;
  EXPECT_TRUE(names_in(dir_).size() == 2) << "only the fixture's stdout.txt and stderr.txt";
}

TEST_F(Cli, OutputsAreWrittenWholeWithNoTemporaryLeft) {
  const fs::path out = dir_ / "out";
  fs::create_directory(out);
  write("out/r.json", "an older report");
  const Result r = run(kQuickSimulate + " --json " + (out / "r.json").string() + " --trace " +
                       (out / "t.json").string() + " --timeline " + (out / "timeline.txt").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(names_in(out), (std::vector<std::string>{"r.json", "t.json", "timeline.txt"}));
  EXPECT_EQ(read_file(out / "r.json").rfind("{", 0), 0u);
}

TEST_F(Cli, CalibrateTakesOutputAndKeepsOutAsADeprecatedName) {
  const std::string log = (dir_ / "missing.log").string();
  const std::string base = "calibrate --hardware hardware/nodes/dgx-a100.yaml --alltoall-log " + log;
  const Result old = run(base + " --out " + (dir_ / "c.yaml").string());
  EXPECT_EQ(old.err.rfind("note: calibrate --out is deprecated; use --output (or -o)\n", 0), 0u) << old.err;
  EXPECT_NE(old.err.find(log), std::string::npos) << "--out still names the file: the log is read next";
  const Result both = run(base + " --out a.yaml --output b.yaml");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("error: --output excludes --out"), std::string::npos) << both.err;
  const Result none = run(base);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err, "error: --output is required (the calibration file to write)\n");
  const Result dash = run(base + " --output -");
  EXPECT_EQ(dash.exit_code, 2);
  EXPECT_EQ(dash.err, "error: --output: a calibration is loaded back before it is kept, so it needs a file name, not "
                      "'-'\n");
}

}  // namespace
