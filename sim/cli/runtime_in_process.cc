// moesim-run: `run` and `calibrate` in this process, which links the GPU runtime (runtime_commands.h).
#include <iostream>

#include "sim/cli/runtime_commands.h"

namespace moesim::cli {

int run_runtime_command(int /*argc*/, char** /*argv*/, const RunArgs* run, const CalibrateArgs* calibrate,
                        const std::string& version) {
  if (run != nullptr) return run_measure(*run, version);
  if (calibrate->out_given) std::cerr << "note: calibrate --out is deprecated; use --output (or -o)\n";
  return run_calibrate(*calibrate, version);
}

}  // namespace moesim::cli
