// moesim: `run` and `calibrate` are handed to moesim-run (runtime_commands.h). exec rather than a
// child process: moesim-run takes this process's place, so its exit code, signals and, under
// mpirun, its rank's identity are the launcher's to see, unchanged.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "sim/cli/runtime_commands.h"
#include "sim/core/error.h"
#include "sim/core/program_folder.h"

namespace moesim::cli {

int run_runtime_command(int argc, char** argv, const RunArgs* run, const CalibrateArgs* /*calibrate*/,
                        const std::string& /*version*/) {
  const std::string command = run != nullptr ? "run" : "calibrate";
  // Only the moesim-run of this build, beside this moesim (the build tree and an installed bin/
  // alike): one found elsewhere could be another version, with other options or outputs.
  const std::filesystem::path program = program_folder() / "moesim-run";
  // argv[0] unchanged: moesim-run's messages and help name the program as the user typed it.
  std::vector<char*> args(argv, argv + argc);
  args.push_back(nullptr);
  std::cout.flush();
  std::fflush(stdout);
  execv(program.c_str(), args.data());
  const int err = errno;  // execv returns only when it failed
  if (err == ENOENT)
    throw InputError("`moesim " + command + "` needs the GPU runtime, which is in moesim-run, and " +
                     program.string() + " does not exist; build it with moesim (cmake --build) or install both "
                     "(cmake --install)");
  throw InputError("cannot start " + program.string() + " for `moesim " + command + "`: " + std::strerror(err));
}

}  // namespace moesim::cli
