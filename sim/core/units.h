// Canonical units of moesim, one per quantity.
//
// Simulated time is an integer count of nanoseconds (TimeNs) so that traces are exact and
// deterministic; sizes are signed 64-bit byte counts (products are checked, see checked_math.h);
// bandwidths are bytes per second and compute rates FLOP per second, both as double.
#pragma once

#include <cstdint>
#include <limits>

namespace moesim {

using TimeNs = std::int64_t;
inline constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

inline constexpr double kNsPerUs = 1e3;
inline constexpr double kNsPerS = 1e9;

inline double ns_to_us(TimeNs t) { return static_cast<double>(t) / kNsPerUs; }
inline double ns_to_ms(TimeNs t) { return static_cast<double>(t) / 1e6; }

inline constexpr std::int64_t kKiB = 1024;
inline constexpr std::int64_t kMiB = 1024 * kKiB;
inline constexpr std::int64_t kGiB = 1024 * kMiB;

}  // namespace moesim
