// --host-launch-us: the host's time per launch in the whole step (StepSpec::host_launch_ns,
// sim/engine/host_issue.h), read by simulate, plan and validate steps with one help text and one
// conversion.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

namespace moesim::cli {

inline constexpr const char* kHostLaunchFlagHelp =
    "host time per launched kernel, copy or collective in microseconds (whole step): each rank's host issues its "
    "tasks in program order and waits for the values it reads (the MoE dispatcher's split sizes, the gradient "
    "norm); default: the host is not modelled (docs/training-step.md#host-launches---host-launch-us)";
inline constexpr double kMaxHostLaunchUs = 1000;

// The flag's value as StepSpec::host_launch_ns; a negative value means the flag was not given.
inline std::optional<std::int64_t> host_launch_ns(double us) {
  if (us < 0) return std::nullopt;
  return std::llround(us * 1e3);
}

}  // namespace moesim::cli
