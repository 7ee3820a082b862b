#include "sim/cli/memory_limit_flag.h"

#include "sim/cli/number_flags.h"
#include "sim/driver/footprint.h"

namespace moesim::cli {

std::int64_t memory_limit_from_flag(const std::string& text) {
  if (text.empty()) return default_memory_limit();
  if (text == "none") return 0;
  return parse_size_bytes(text, "--memory-limit");
}

}  // namespace moesim::cli
