// One measured all-to-all: the bytes each rank sent to each peer and the time it took. The
// runtime's calibration measures them (runtime/bench/calibrate_collectives.h), nccl-tests logs
// give them, and the network calibration fits them (sim/driver/network_calibration.h); a plain
// value here so that the runtime needs none of the fitting.
#pragma once

#include <cstdint>

namespace moesim {

struct AllToAllPoint {
  std::int64_t bytes_per_peer = 0;
  double time_ns = 0;
};

}  // namespace moesim
