// Turning a modelled duration (double nanoseconds) into simulated time (integer ns).
//
// A model fed extreme but accepted inputs (a tiny efficiency, a huge size) can produce durations
// beyond what 64-bit time can hold; rounding such a value would wrap or saturate and a task would
// "finish in 0 cycles". Durations above kMaxDurationNs (about 146 years) are rejected as input
// errors naming what was being costed.
#pragma once

#include <cmath>
#include <string>

#include "sim/core/error.h"
#include "sim/core/units.h"

namespace moesim {

inline constexpr double kMaxDurationNs = 4.611686018427388e18;  // 2^62 ns

// Rounds to the nearest ns; work that is not empty takes at least 1 ns.
inline TimeNs to_duration_ns(double ns, bool nonzero_work, const std::string& what) {
  if (!std::isfinite(ns) || ns < 0.0 || ns > kMaxDurationNs) {
    throw InputError("the modelled duration of " + what + " (" + std::to_string(ns) +
                     " ns) is not a usable time: check the sizes and the bandwidth, efficiency and "
                     "peak values of the hardware file");
  }
  const auto t = static_cast<TimeNs>(std::llround(ns));
  return nonzero_work && t < 1 ? 1 : t;
}

}  // namespace moesim
