#include "sim/cli/exit_codes.h"

#include <cstdio>
#include <exception>
#include <iostream>

#include "sim/cli/mpi_world.h"
#include "sim/core/error.h"

namespace moesim::cli {

namespace {

// Results go to stdout: a write that failed there (a full disk, /dev/full) must not end in exit 0
// with the output cut short. 2, as for an output file that cannot be written.
int check_stdout_written(int code) {
  std::cout.flush();
  const bool written = std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good();
  if (written) return code;
  std::cerr << "error: the output could not be written to stdout\n";
  return code == 0 ? 2 : code;
}

}  // namespace

int run_with_exit_codes(int (*body)(int, char**), int argc, char** argv) {
  try {
    return check_stdout_written(body(argc, argv));
  } catch (const InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const QuietExit&) {
    return 0;  // under mpirun another process reported the failure (mpi_world.h)
  } catch (const InternalError& e) {
    std::cerr << "moesim: " << e.what() << "\n(this is a bug in moesim; please report it)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "moesim: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace moesim::cli
