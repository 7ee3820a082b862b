#include "runtime/bench/calibrate_device_copies.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/bench/calibrate_kernels.h"
#include "runtime/bench/op_timer.h"
#include "runtime/comm/loopback.h"
#include "sim/core/error.h"
#include "sim/spec/yaml_text.h"

namespace moesim::runtime {
namespace {

// The loopback all-to-all of p virtual ranks on `device`, rank 0 on `stream` (the timer's) and
// every other rank on a stream of its own, as the executor gives each rank its comm streams; the
// buffers hold the largest size, and smaller sizes use their prefixes (blocks b apart).
class LoopbackExchange {
 public:
  LoopbackExchange(DeviceOps& device, int p, std::int64_t max_bytes_per_peer, int stream)
      : transport_(device, p) {
    for (int r = 0; r < p; ++r) {
      AllToAllMember m;
      m.rank = r;
      m.device = &device;
      m.stream = r == 0 ? stream : device.create_stream();
      const std::int64_t bytes = p * max_bytes_per_peer;
      void* send = buffers_.emplace_back(std::make_unique<DeviceBuffer>(device, bytes, "loopback calibration send"))->get();
      m.send = send;
      m.recv = buffers_.emplace_back(std::make_unique<DeviceBuffer>(device, bytes, "loopback calibration receive"))->get();
      device.zero(send, bytes, m.stream);
      members_.push_back(m);
    }
    device.synchronize();
  }

  // One all-to-all of `bytes_per_peer` per pair.
  void run(std::int64_t bytes_per_peer) {
    BlockLayout layout;
    layout.peer_stride = layout.piece_stride = layout.piece_bytes = bytes_per_peer;
    for (AllToAllMember& m : members_) m.send_layout = m.recv_layout = layout;
    transport_.all_to_all(members_, 0);
  }

 private:
  LoopbackTransport transport_;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
  std::vector<AllToAllMember> members_;
};

// The fit of one rank count's times. Times that do not grow with the bytes are the host thread's
// issue time, not the copies' (on an H200 a one-rank exchange of up to 16 MiB took the same time
// at every size): that is the sizes' fault, named as such, not a fault of the program.
LaunchBandwidthFit fit_device_copies(int p, const std::vector<std::int64_t>& sizes, const std::vector<double>& bytes,
                                     const std::vector<double>& ns) {
  try {
    return fit_launch_and_bandwidth(bytes, ns);
  } catch (const InternalError&) {
    std::string times;
    for (double t : ns) times += (times.empty() ? "" : ", ") + std::to_string(std::llround(t / 1e3)) + " us";
    throw InputError("calibration: the loopback all-to-all of " + std::to_string(p) + " rank(s) took " + times +
                     " at --loopback-bytes " + std::to_string(sizes.front()) + " to " + std::to_string(sizes.back()) +
                     ": its time does not grow with its bytes (the host thread issuing its copies bounds it), so "
                     "no bandwidth can be fitted; give larger --loopback-bytes");
  }
}

// The GEMM loop beside the probe lasts this many times the copies' window alone: a copy that
// waits for the running GEMM slows far more than the PCIe copies' cells do (on an H200, combines
// of 179-195 us against 11 us alone, docs/validation.md), and factors down to 1/200 are resolved.
constexpr double kProbeCover = 200;

}  // namespace

std::int64_t device_copy_bytes_per_peer(std::int64_t exchange_bytes, std::int64_t ranks) {
  return exchange_bytes / (ranks * ranks);
}

void check_device_copy_options(const CalibrationOptions& o) {
  check_axis(o.loopback_ranks, "loopback rank count", "loopback rank counts");
  if (o.loopback_ranks.empty()) return;
  if (o.loopback_ranks.back() > kMaxDeviceCopyRanks)
    throw InputError("calibration: loopback rank count " + std::to_string(o.loopback_ranks.back()) +
                     " is above " + std::to_string(kMaxDeviceCopyRanks) + " (each all-to-all is p^2 copies)");
  check_axis(o.loopback_bytes, "loopback all-to-all size", "loopback all-to-all sizes");
  if (o.loopback_bytes.size() < 2)
    throw InputError("calibration: the loopback all-to-all needs at least two sizes to fit a launch and a bandwidth");
  const std::int64_t p = o.loopback_ranks.back();
  // Every rank count must see sizes that differ: blocks of at least one byte, growing.
  for (std::size_t i = 0; i < o.loopback_bytes.size(); ++i) {
    const std::int64_t block = device_copy_bytes_per_peer(o.loopback_bytes[i], p);
    if (block < 1 || (i > 0 && block <= device_copy_bytes_per_peer(o.loopback_bytes[i - 1], p)))
      throw InputError("calibration: loopback all-to-all size " + std::to_string(o.loopback_bytes[i]) +
                       " gives " + std::to_string(p) + " ranks blocks of " + std::to_string(block) +
                       " bytes, no larger than the size before it; sizes are the whole exchange's bytes, "
                       "split over p^2 blocks");
  }
  const double buffers = 2.0 * static_cast<double>(o.loopback_bytes.back());
  if (buffers > static_cast<double>(kMaxDeviceCopyBufferBytes)) {
    throw InputError("calibration: the loopback all-to-all of " + std::to_string(o.loopback_bytes.back()) +
                     " bytes needs " + std::to_string(static_cast<std::int64_t>(buffers / (1 << 20))) +
                     " MiB of buffers, above " + std::to_string(kMaxDeviceCopyBufferBytes >> 30) +
                     " GiB (every rank's send and receive buffers: 2 x the exchange's bytes)");
  }
}

DeviceCopyFigures measure_device_copies(DeviceOps& device, const CalibrationOptions& o,
                                        const std::function<void(int)>& computation) {
  check_device_copy_options(o);
  DeviceCopyFigures f;
  if (o.loopback_ranks.empty()) return f;
  OpTimer timer(device, o);
  for (const std::int64_t ranks : o.loopback_ranks) {
    const auto p = static_cast<int>(ranks);
    // The same exchange sizes at every p (each block 1/p^2 of it), so that every p is timed from
    // host-bound exchanges to ones that stream for hundreds of microseconds.
    LoopbackExchange exchange(device, p, device_copy_bytes_per_peer(o.loopback_bytes.back(), ranks), timer.stream());
    std::vector<double> bytes, ns;
    for (const std::int64_t total : o.loopback_bytes) {
      const std::int64_t b = device_copy_bytes_per_peer(total, ranks);
      bytes.push_back(2.0 * static_cast<double>(ranks * ranks) * static_cast<double>(b));
      ns.push_back(timer.per_op_ns([&] { exchange.run(b); }));
    }
    const LaunchBandwidthFit fit = fit_device_copies(p, o.loopback_bytes, bytes, ns);
    f.by_ranks[p] = KernelFigure{static_cast<TimeNs>(std::llround(fit.launch_ns)), fit.bytes_per_ns * 1e9};
    if (o.progress)
      o.progress("loopback all-to-all of " + std::to_string(p) + " rank(s): launch " +
                 std::to_string(fit.launch_ns / 1e3) + " us, " + std::to_string(fit.bytes_per_ns) + " GB/s");
  }
  // Beside a GEMM: the smallest p (a one-rank run's copy by default) at the largest size.
  const auto p = static_cast<int>(o.loopback_ranks.front());
  const std::int64_t b = device_copy_bytes_per_peer(o.loopback_bytes.back(), p);
  LoopbackExchange exchange(device, p, b, timer.stream());
  OpTimer other(device, o);
  const double factor = slowdown_factor(timer, [&](int) { exchange.run(b); }, other, computation, kProbeCover);
  f.with_computation = DeviceCopyFigures::Probe{factor, p, b};
  return f;
}

void write_device_copy_figures(std::ostream& y, const DeviceCopyFigures& f) {
  if (f.by_ranks.empty()) return;
  y << "device_copy_collectives:  # the loopback all-to-all of p virtual ranks: time = launch + bytes / bandwidth, "
       "bytes = 2 x the sum of all blocks\n"
    << "  fits:\n";
  for (const auto& [p, fig] : f.by_ranks) {
    y << "    - {ranks: " << p << ", launch: " << yaml_fixed(static_cast<double>(fig.launch_ns) / 1e3, 3)
      << " us, bandwidth: " << yaml_fixed(fig.bandwidth / 1e9, 3) << " GB/s}\n";
  }
  if (f.with_computation) {
    const DeviceCopyFigures::Probe& w = *f.with_computation;
    y << "  with_computation: {factor: " << yaml_fixed(w.factor, 6) << ", ranks: " << w.ranks
      << ", bytes_per_peer: " << w.bytes_per_peer << "}  # speed beside a GEMM / alone; reported, not used\n";
  }
}

}  // namespace moesim::runtime
