// Strict numbers on every command (a sign, an overflow, NaN or infinity is refused naming the flag,
// the value and the range) and files of the wrong kind named as what they are.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

// `moesim run` without the flags the cases below give.
const std::string kRun = kQuickRun.substr(0, kQuickRun.find(" --chunks"));
const std::string kCollective = "collective --hardware hardware/nodes/dgx-a100.yaml";
const std::string kCalibrate = "calibrate --hardware hardware/nodes/hgx-h100.yaml --output c.yaml";

struct Case {
  std::string args;
  std::string expect;  // the whole first line of stderr
};

void expect_refused(const Case& c, const Result& r) {
  EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')), c.expect) << c.args;
  EXPECT_EQ(r.out, "") << c.args;
}

TEST_F(Cli, ASignedSeedIsRefusedNotWrapped) {
  for (const std::string& command : {kQuickSimulate, kRun}) {
    const Case c{command + " --seed -1", "error: --seed: -1 is negative; it must be in [0, 9223372036854775807]"};
    expect_refused(c, run(c.args));
  }
  const Case above{kQuickSimulate + " --seed 18446744073709551615",
                   "error: --seed: 18446744073709551615 is outside [0, 9223372036854775807]"};
  expect_refused(above, run(above.args));
}

TEST_F(Cli, AnOverflowNamesTheFlagAndTheLimit) {
  const Case c{"simulate --run examples/quickstart.yaml --tokens 4611686018427387904",
               "error: --tokens: 4611686018427387904 is outside [1, 1099511627776]"};
  expect_refused(c, run(c.args));
}

TEST_F(Cli, EveryIntegerFlagOfEveryCommandIsRead) {
  const Case cases[] = {
      {kQuickSimulate + " --chunks 99999999999", "error: --chunks: 99999999999 is outside [1, 1048576]"},
      {kQuickSimulate + " --ep -1", "error: --ep: -1 is negative; it must be in [0, 16777216]"},
      {kQuickSimulate + " --tp +2", "error: --tp: '+2' is not an integer in [1, 16777216] (decimal digits, no sign)"},
      {kQuickSimulate + " --layers 1e3",
       "error: --layers: '1e3' is not an integer in [1, 100000] (decimal digits, no sign)"},
      {kQuickSimulate + " --slots 3", "error: --slots: 3 is outside [1, 2]"},
      {kQuickSimulate + " --zero -1", "error: --zero: -1 is negative; it must be in [0, 3]"},
      {"graph export " + kQuickSimulate.substr(9) + " --tokens 0x10",
       "error: --tokens: '0x10' is not an integer in [1, 1099511627776] (decimal digits, no sign)"},
      {kQuickPlan + " --jobs -1", "error: --jobs: -1 is negative; it must be in [0, 4096]"},
      {kQuickPlan + " --max-nodes 0", "error: --max-nodes: 0 is outside [1, 65536]"},
      {kQuickPlan + " --ep 99999999999999999999", "error: --ep: 99999999999999999999 is outside [0, 16777216]"},
      {kQuickPlan.substr(0, kQuickPlan.find("--tokens")) + "--tokens -4096",
       "error: --tokens: -4096 is negative; it must be in [1, 1099511627776]"},
      {kQuickSweep + " --layers -1", "error: --layers: -1 is negative; it must be in [1, 100000]"},
      {kQuickSweep + " --jobs 99999", "error: --jobs: 99999 is outside [0, 4096]"},
      {"sweep --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml --tokens 2048 "
       "--gpus 99999999999999999999",
       "error: --gpus: 99999999999999999999 is outside [1, 16777216]"},
      {kCollective + " --ranks -1", "error: --ranks: -1 is negative; it must be in [0, 16777216]"},
      {kCollective + " --step-factor 1", "error: --step-factor: 1 is outside [2, 1024]"},
      {kCollective + " --min-bytes -1M",
       "error: --min-bytes: '-1M' is negative; give a size of 1 B to 1 PiB, in bytes or K, M, G (e.g. 1M)"},
      {kCollective + " --max-bytes 99999999999999999999",
       "error: --max-bytes: 99999999999999999999 is outside [1 B, 1 PiB]"},
      {kCollective + " --max-bytes 2000000G", "error: --max-bytes: 2000000G is outside [1 B, 1 PiB]"},
      {kRun + " --iters 0", "error: --iters: 0 is outside [1, 1000000]"},
      {kRun + " --warmup -1", "error: --warmup: -1 is negative; it must be in [0, 1000000]"},
      {kRun + " --ranks -2", "error: --ranks: -2 is negative; it must be in [1, 16777216]"},
      {kCalibrate + " --device 99999999999", "error: --device: 99999999999 is outside [0, 1023]"},
      {kCalibrate + " --copy-size -1M",
       "error: --copy-size: '-1M' is negative; give a size of 1 B to 1 PiB, in bytes or K, M, G (e.g. 1M)"},
      {kCalibrate + " --dims 8,-16", "error: --dims: -16 is negative; it must be in [1, 1048576]"},
      {"calibrate --hardware hardware/nodes/dgx-a100.yaml --alltoall-log x.log --output c.yaml --ranks -8",
       "error: --ranks: -8 is negative; it must be in [0, 16777216]"},
      {"compare a.json b.json --worst 1e9",
       "error: --worst: '1e9' is not an integer in [0, 1000000] (decimal digits, no sign)"},
  };
  for (const Case& c : cases) expect_refused(c, run(c.args));
}

TEST_F(Cli, FloatingPointFlagsMustBeFiniteAndInRange) {
  const Case cases[] = {
      {kQuickPlan + " --fit --max-step-ms nan",
       "error: --max-step-ms: nan is not a finite number; it must be in [0, 1000000000]"},
      {kQuickPlan + " --fit --max-step-ms inf",
       "error: --max-step-ms: inf is not a finite number; it must be in [0, 1000000000]"},
      {kQuickPlan + " --fit --max-step-ms -1", "error: --max-step-ms: -1 is outside [0, 1000000000]"},
      {kQuickSweep + " --step-target-ms nan",
       "error: --step-target-ms: nan is not a finite number; it must be in [0, 1000000000]"},
      {kQuickSweep + " --step-target-ms -5", "error: --step-target-ms: -5 is outside [0, 1000000000]"},
      {kQuickSweep + " --step-target-ms 1e400", "error: --step-target-ms: 1e400 is outside [0, 1000000000]"},
      {kCalibrate + " --min-time-ms -inf",
       "error: --min-time-ms: -inf is not a finite number; it must be in (0, 10000]"},
      {kCalibrate + " --min-time-ms 0", "error: --min-time-ms: 0 is outside (0, 10000]"},
      {kCalibrate + " --min-time-ms fast", "error: --min-time-ms: 'fast' is not a number in (0, 10000]"},
      {kQuickSimulate + " --routing zipf:nan",
       "error: --routing: routing 'zipf:nan': the Zipf exponent 'nan' is not a number; valid: uniform, zipf:<s> (s >= "
       "0, e.g. zipf:1.2), matrix:<csv file>"},
  };
  for (const Case& c : cases) expect_refused(c, run(c.args));
}

TEST_F(Cli, LeadingZerosAreDecimalNotOctal) {
  const fs::path j = dir_ / "r.json";
  const std::string without_chunks = kQuickSimulate.substr(0, kQuickSimulate.find("--chunks"));
  ASSERT_EQ(run(without_chunks + "--chunks 010 --json " + j.string()).exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(read_file(j))["config"]["run"]["num_chunks"], 10);
}

TEST_F(Cli, AFileOfTheWrongKindIsNamedAsWhatItIs) {
  const Case cases[] = {
      {"simulate --model models/moe-gpt-s-64e.yaml --hardware models/moe-gpt-s-64e.yaml --tokens 4096",
       "error: models/moe-gpt-s-64e.yaml:7:7: kind: this is a model file (kind: model), which goes to --model; "
       "--hardware takes a gpu, node or cluster file"},
      {"simulate --model hardware/nodes/hgx-h100.yaml --hardware hardware/nodes/hgx-h100.yaml --tokens 4096",
       "error: hardware/nodes/hgx-h100.yaml:6:7: kind: this is a node file (kind: node), which goes to --hardware; "
       "--model takes a model file"},
      {"simulate --run models/moe-gpt-s-64e.yaml",
       "error: models/moe-gpt-s-64e.yaml:7:7: kind: this is a model file (kind: model), which goes to --model; --run "
       "takes a run file"},
      {"simulate --run examples/quickstart.yaml --calibration examples/quickstart.yaml",
       "error: examples/quickstart.yaml:5:7: kind: this is a run file (kind: run), which goes to --run; "
       "--calibration takes a calibration file"},
      {"sweep --grid examples/quickstart.yaml",
       "error: examples/quickstart.yaml:5:7: kind: this is a run file (kind: run), which goes to --run; --grid takes a "
       "sweep file"},
      {"plan --model models/moe-gpt-s-64e.yaml --hardware examples/sweep-1000.yaml --tokens 4096",
       "error: examples/sweep-1000.yaml:5:7: kind: this is a sweep file (kind: sweep), which goes to --grid; "
       "--hardware takes a gpu, node or cluster file"},
      {"collective --hardware models/moe-gpt-s-64e.yaml",
       "error: models/moe-gpt-s-64e.yaml:7:7: kind: this is a model file (kind: model), which goes to --model; "
       "--hardware takes a gpu, node or cluster file"},
  };
  for (const Case& c : cases) expect_refused(c, run(c.args));
}

}  // namespace
