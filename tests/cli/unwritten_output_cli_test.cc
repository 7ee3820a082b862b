// Output that is not written must not end in exit 0: an option given an empty value (often an
// unset shell variable) used to read as not given, and a failed write to stdout went unnoticed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

TEST_F(Cli, AnEmptyValueIsRefusedNotTakenAsNotGiven) {
  const struct {
    std::string args;
    std::string expect;
  } cases[] = {
      {kQuickSimulate + " --json ''", "error: --json: the value is empty"},
      {kQuickSimulate + " --trace ''", "error: --trace: the value is empty"},
      {kQuickSimulate + " --timeline ''", "error: --timeline: the value is empty"},
      {kQuickSimulate + " --calibration ''", "error: --calibration: the value is empty"},
      {kQuickPlan + " --json ''", "error: --json: the value is empty"},
      {kQuickSweep + " --csv ''", "error: --csv: the value is empty"},
      {"presets ''", "error: kind: the value is empty"},
      {kQuickRun + " --dtype ''", "error: --dtype: the value is empty"},
  };
  for (const auto& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_EQ(r.err, c.expect + "\n") << c.args;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

TEST_F(Cli, AFailedWriteToStdoutExits2) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  const fs::path err = dir_ / "stderr.txt";
  for (const std::string& args : {std::string("presets"), kQuickSimulate}) {
    // Every write to /dev/full fails with ENOSPC, as on a full disk.
    const std::string cmd = std::string("cd ") + MOESIM_SOURCE_DIR + " && " + MOESIM_BINARY + " " + args +
                            " >/dev/full 2>" + err.string();
    const int status = std::system(cmd.c_str());
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2) << args;
    EXPECT_EQ(read_file(err), "error: the output could not be written to stdout\n") << args;
  }
}

}  // namespace
