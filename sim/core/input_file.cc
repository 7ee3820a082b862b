#include "sim/core/input_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "sim/core/error.h"

namespace moesim {

std::string read_input_file(const std::string& path, std::uintmax_t max_bytes, const std::string& what) {
  const SourceLocation at{path, 0, 0};
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw InputError(at, "cannot open " + what + " '" + path + "': no such file");
  if (!std::filesystem::is_regular_file(status)) throw InputError(at, "'" + path + "' is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(at, "cannot read " + what + " '" + path + "'");
  const auto too_large = [&] { return InputError(at, what + " larger than " + std::to_string(max_bytes) + " bytes"); };
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes) throw too_large();
  // Read in blocks and stop past the limit: the size above can be wrong (a file still growing, or
  // one under /proc that says 0).
  std::string text;
  char block[1 << 16];
  while (in.read(block, sizeof block) || in.gcount() > 0) {
    text.append(block, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) throw too_large();
  }
  if (in.bad()) throw InputError(at, "cannot read " + what + " '" + path + "'");
  return text;
}

}  // namespace moesim
