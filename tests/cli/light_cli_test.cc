// The light `moesim` program (sim/cli/runtime_commands.h): it links neither the GPU runtime nor
// MPI, hands `run` and `calibrate` to the moesim-run beside it, and says so, exit 2, when that
// program or the MPI plugin is missing instead of failing obscurely.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

std::string shell_output(const std::string& cmd) {
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

// What made every command slow to start: the GPU runtime's and MPI's shared libraries, loaded by
// the dynamic linker before main.
TEST_F(Cli, MoesimLinksNeitherTheGpuRuntimeNorMpi) {
  const std::string libs = shell_output(std::string("ldd ") + MOESIM_BINARY + " 2>&1");
  ASSERT_NE(libs.find("libc.so"), std::string::npos) << "ldd did not list the libraries: " << libs;
  for (const char* lib : {"libmpi", "libcudart", "libcublas", "libnccl", "libcuda."})
    EXPECT_EQ(libs.find(lib), std::string::npos) << lib << " in:\n" << libs;
}

TEST_F(Cli, HelpListsTheCommandsMoesimRunRuns) {
  const Result r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* command : {"simulate", "plan", "sweep", "run", "calibrate", "compare"})
    EXPECT_NE(r.out.find(std::string("  ") + command + " "), std::string::npos) << command << "\n" << r.out;
}

TEST_F(Cli, RunWithoutMoesimRunBesideItExitsTwoNamingIt) {
  const fs::path lone = dir_ / "moesim";
  fs::copy_file(MOESIM_BINARY, lone);
  const Result r = run(kQuickRun, lone.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: `moesim run` needs the GPU runtime, which is in moesim-run, and " +
                       (dir_ / "moesim-run").string() + " does not exist"),
            std::string::npos)
      << r.err;
  // A bad command line is still refused by moesim itself, before any hand-off.
  const Result bad = run(kQuickRun + " --iters 0", lone.string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("error: --iters: 0 is outside"), std::string::npos) << bad.err;
}

// Started as one of several MPI processes, a copy without its MPI plugin refuses to run the whole
// job alone (as a build without MPI does); a lone process runs as without a launcher.
TEST_F(Cli, SeveralMpiProcessesWithoutThePluginExitTwo) {
  const fs::path lone = dir_ / "moesim";
  fs::copy_file(MOESIM_BINARY, lone);
  const Result r = run(kQuickPlan, "env OMPI_COMM_WORLD_SIZE=2 " + lone.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: this process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE=2) but "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(run(kQuickPlan, "env OMPI_COMM_WORLD_SIZE=1 " + lone.string()).exit_code, 0);
}

}  // namespace
