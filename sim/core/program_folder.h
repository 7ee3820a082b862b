// The folder of the running program's file, where moesim finds the files installed beside it:
// moesim-run (the program with the GPU runtime, which `moesim run` hands its command line to) and
// the MPI plugin (libmoesim_mpi.so, in that folder or in ../lib of it).
#pragma once

#include <filesystem>

namespace moesim {

// From /proc/self/exe, so neither argv[0] nor the working directory matters; empty when unknown.
std::filesystem::path program_folder();

}  // namespace moesim
