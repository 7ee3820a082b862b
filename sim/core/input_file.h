// Reading a whole input file the user names (a YAML preset, a task graph, an nccl-tests log).
//
// Only regular files are read, and only up to a limit: a FIFO or a device such as /dev/zero given
// as an input would otherwise be read without end, into unbounded memory.
#pragma once

#include <cstdint>
#include <string>

namespace moesim {

// The file's text. InputError naming `path` when it does not exist, is not a regular file, holds
// more than max_bytes, or cannot be read; `what` names the kind of file in the messages ("file",
// "nccl-tests log").
std::string read_input_file(const std::string& path, std::uintmax_t max_bytes, const std::string& what);

}  // namespace moesim
