// The device-copy collectives of `moesim calibrate`: the all-to-all of the runtime's loopback
// transport (runtime/comm/loopback.h), as `moesim run --ranks p --loopback` runs it (p = 1: the
// one copy of a one-rank run), for each of options.loopback_ranks at each of
// options.loopback_bytes, the exchange's bytes (the sum of its p^2 blocks, each 1/p^2 of it,
// rounded down): the same sizes at every p, from exchanges bound by the host thread that issues
// the copies to ones that stream through HBM (on an H200 a one-rank exchange of up to 16 MiB did
// not grow with its bytes). Each p's times are fitted to
//   t = launch + bytes / bandwidth,   bytes = 2 x p^2 x bytes per peer
// (every block read once and written once), the bytes sim/net/alpha_beta.cc counts for a
// device-copy collective, so that the fitted figures price its tasks directly
// (sim/net/device_copy_cost.h). Timed with OpTimer: virtual rank 0's stream is the timer's, and
// the exchange's rendezvous makes it wait for every rank's copies, so its events bracket the whole
// collective on a GPU.
//
// Also measured once: the all-to-all of the smallest p at the largest size, beside `computation`
// (a GPU-filling GEMM) on another stream, as slowdown_factor measures the PCIe copies: reported as
// with_computation, not used in pricing (docs/calibration.md).
#pragma once

#include <functional>
#include <ostream>

#include "runtime/bench/calibrate.h"
#include "runtime/exec/device.h"

namespace moesim::runtime {

// The buffers of the largest size: 2 x its bytes (every rank's send and receive buffer). Refused
// above this.
inline constexpr std::int64_t kMaxDeviceCopyBufferBytes = std::int64_t{16} << 30;
// Virtual rank counts above this are refused: p^2 copies per all-to-all, issued by one thread.
inline constexpr std::int64_t kMaxDeviceCopyRanks = 64;

// Bytes per peer of an exchange of `exchange_bytes` among `ranks` ranks: 1/p^2 of it, rounded down.
std::int64_t device_copy_bytes_per_peer(std::int64_t exchange_bytes, std::int64_t ranks);

// InputError for rank counts or sizes that are not positive and strictly increasing, fewer than
// two sizes, sizes whose blocks at the largest p are empty or do not grow, more than
// kMaxDeviceCopyRanks ranks or buffers above kMaxDeviceCopyBufferBytes.
void check_device_copy_options(const CalibrationOptions& o);

// The figures per p and the with_computation probe; `computation(stream)` issues one GEMM.
DeviceCopyFigures measure_device_copies(DeviceOps& device, const CalibrationOptions& o,
                                        const std::function<void(int)>& computation);

// The calibration file's device_copy_collectives section; nothing when by_ranks is empty.
void write_device_copy_figures(std::ostream& y, const DeviceCopyFigures& f);

}  // namespace moesim::runtime
