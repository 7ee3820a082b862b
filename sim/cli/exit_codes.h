// The exit codes of `moesim` and `moesim-run` (main.cc's header lists them): what a command's
// outcome, or the exception that ended it, becomes.
#pragma once

namespace moesim::cli {

// Runs body(argc, argv) and returns its exit code, or 2 with its error on stderr for bad input
// (InputError) or a stdout that could not be written, 0 for a QuietExit (mpi_world.h), 1 for a bug.
int run_with_exit_codes(int (*body)(int, char**), int argc, char** argv);

}  // namespace moesim::cli
