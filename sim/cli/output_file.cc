#include "sim/cli/output_file.h"

#include <fstream>
#include <iostream>

#include "sim/core/error.h"

namespace moesim::cli {

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) throw InputError("cannot open '" + path + "' for writing");
  out << text;
  if (!out) throw InputError("failed writing '" + path + "'");
}

}  // namespace moesim::cli
