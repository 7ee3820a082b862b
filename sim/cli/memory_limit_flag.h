// --memory-limit, taken by the commands that simulate (simulate, graph export, plan, sweep): the
// estimated memory of a run (sim/driver/footprint.h) must stay within it, or the run stops before
// it starts, with exit 2 and the estimate.
#pragma once

#include <cstdint>
#include <string>

namespace moesim::cli {

inline constexpr const char* kMemoryLimitHelp =
    "largest estimated memory of a run: a size (K, M, G), or none; default half of this machine's memory";

// "" -> half of physical memory; "none" -> 0 (no limit); otherwise a size (parse_size_bytes).
std::int64_t memory_limit_from_flag(const std::string& text);

}  // namespace moesim::cli
