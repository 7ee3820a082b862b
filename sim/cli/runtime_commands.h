// `moesim run` and `moesim calibrate` need the GPU runtime (CUDA, cuBLAS, NCCL), which would cost
// every other command its start-up: loading those libraries alone took longer than a whole
// `moesim simulate`. So two programs share the command line of main.cc:
// - moesim-run links the runtime and runs these two commands itself (runtime_in_process.cc);
// - moesim links none of it and hands them, once its parser accepted the command line, to the
//   moesim-run beside it (runtime_handoff.cc): the same arguments, the same exit code.
#pragma once

#include <string>

#include "sim/cli/calibrate_command.h"
#include "sim/cli/run_command.h"

namespace moesim::cli {

// The parsed command (exactly one of `run` and `calibrate` is set) and the command line it was
// parsed from. Returns the exit code; throws InputError (exit 2) as the commands do.
int run_runtime_command(int argc, char** argv, const RunArgs* run, const CalibrateArgs* calibrate,
                        const std::string& version);

}  // namespace moesim::cli
