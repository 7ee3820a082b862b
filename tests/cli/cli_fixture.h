// The fixture of the end-to-end CLI tests: runs the `moesim` binary (MOESIM_BINARY) from the
// source root with stdout and stderr captured, in a private temporary directory.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace moesim::cli_test {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Small, quick invocations of the commands, for tests that add the one flag they are about.
inline const std::string kQuickSimulate =
    "simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml --tokens 4096 "
    "--chunks 4";
inline const std::string kQuickPlan =
    "plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/pipemoe-alpha-beta.yaml --tokens 4096 "
    "--strategies none --chunks 1-2";
inline const std::string kQuickSweep =
    "sweep --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml --gpus 8 --tokens 2048 "
    "--chunks 1-2 --strategies none";
inline const std::string kQuickRun =
    "run --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml --tokens 256 "
    "--chunks 2 --iters 1 --warmup 0";

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moesim_cli_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `program` may be another copy of moesim, or a command line that ends in one (`env VAR=1 path`).
  Result run(const std::string& args, const std::string& program = MOESIM_BINARY) {
    const fs::path out = dir_ / "stdout.txt";
    const fs::path err = dir_ / "stderr.txt";
    const std::string cmd = std::string("cd ") + MOESIM_SOURCE_DIR + " && " + program + " " + args +
                            " >" + out.string() + " 2>" + err.string();
    const int status = std::system(cmd.c_str());
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }

  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }

  fs::path dir_;
};

}  // namespace moesim::cli_test
