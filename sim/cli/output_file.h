// Writing a command's output: to a file, or to stdout when the path is "-".
#pragma once

#include <string>

namespace moesim::cli {

// InputError when the file cannot be opened or written.
void write_output(const std::string& path, const std::string& text);

}  // namespace moesim::cli
