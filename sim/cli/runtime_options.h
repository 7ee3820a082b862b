// The options of `moesim run` and `moesim calibrate`, the commands moesim-run carries out with
// the GPU runtime (runtime_commands.h), registered apart from main.cc to keep it short.
#pragma once

#include "sim/cli/calibrate_command.h"
#include "sim/cli/run_command.h"

namespace CLI {
class App;
}

namespace moesim::cli {

CLI::App* add_run(CLI::App& app, RunArgs& a);
CLI::App* add_calibrate(CLI::App& app, CalibrateArgs& a);

}  // namespace moesim::cli
