#include "sim/core/program_folder.h"

#include <system_error>

namespace moesim {

std::filesystem::path program_folder() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path{} : exe.parent_path();
}

}  // namespace moesim
