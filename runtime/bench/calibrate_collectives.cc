#include "runtime/bench/calibrate_collectives.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "sim/core/error.h"

namespace moesim::runtime {

namespace {

// One member's stream and timing events.
struct Member {
  DeviceOps* device = nullptr;
  int rank = 0;
  int stream = 0;
  int start = 0;
  int stop = 0;
};

// Device memory of one size's exchange, freed also when a collective throws.
class Buffer {
 public:
  Buffer(DeviceOps& device, std::int64_t bytes, const char* what) : device_(device), p_(device.alloc_device(bytes, what)) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    try {
      device_.free_device(p_);
    } catch (const std::exception&) {  // after a sticky device error the frees fail too
    }
  }
  void* get() const { return p_; }

 private:
  DeviceOps& device_;
  void* p_;
};

}  // namespace

std::vector<AllToAllPoint> measure_all_to_all(Transport& transport, const std::vector<ExecutorRank>& ranks,
                                              const AllToAllCalibrationOptions& o) {
  const int n = static_cast<int>(ranks.size());
  if (n < 2) throw InputError("an all-to-all calibration needs at least 2 ranks, got " + std::to_string(n));
  if (transport.group_size() != n) {
    throw InputError("the all-to-all calibration drives every rank from this process: the group has " +
                     std::to_string(transport.group_size()) + " ranks, " + std::to_string(n) + " are local");
  }
  if (o.bytes_per_peer.empty()) throw InputError("an all-to-all calibration needs at least one message size");
  for (std::size_t i = 0; i < o.bytes_per_peer.size(); ++i) {
    if (o.bytes_per_peer[i] <= 0 || (i > 0 && o.bytes_per_peer[i] <= o.bytes_per_peer[i - 1]))
      throw InputError("all-to-all message sizes must be positive and ascending");
  }
  if (o.min_reps < 1 || o.max_reps < o.min_reps || o.warmup < 0 || !(o.min_time_ms > 0))
    throw InputError("all-to-all calibration repetitions: need warmup >= 0, 1 <= min_reps <= max_reps, min_time_ms > 0");

  std::set<int> seen;
  for (const ExecutorRank& r : ranks) {
    if (r.rank < 0 || r.rank >= n || !seen.insert(r.rank).second)
      throw InputError("all-to-all calibration ranks must be 0.." + std::to_string(n - 1) + ", each once");
  }
  std::vector<Member> members;
  for (const ExecutorRank& r : ranks) {
    Member m;
    m.device = r.device;
    m.rank = r.rank;
    m.stream = r.device->create_stream();
    m.start = r.device->create_event(true);
    m.stop = r.device->create_event(true);
    members.push_back(m);
  }
  std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.rank < b.rank; });
  std::vector<DeviceOps*> devices;
  for (const Member& m : members)
    if (std::find(devices.begin(), devices.end(), m.device) == devices.end()) devices.push_back(m.device);

  std::vector<AllToAllPoint> points;
  for (const std::int64_t b : o.bytes_per_peer) {
    const std::int64_t bytes = b * n;
    BlockLayout layout;
    layout.peer_stride = b;
    layout.piece_stride = b;
    layout.piece_bytes = b;
    std::vector<std::unique_ptr<Buffer>> buffers;
    std::vector<AllToAllMember> collective;
    for (const Member& m : members) {
      void* send = buffers.emplace_back(std::make_unique<Buffer>(*m.device, bytes, "all-to-all calibration send buffer"))->get();
      void* recv = buffers.emplace_back(std::make_unique<Buffer>(*m.device, bytes, "all-to-all calibration receive buffer"))->get();
      m.device->zero(send, bytes, m.stream);
      collective.push_back(AllToAllMember{m.rank, m.device, m.stream, send, layout, recv, layout});
    }
    // Time per collective over `reps` back to back: the slowest member's.
    const auto timed = [&](int reps) {
      for (const Member& m : members) m.device->record(m.start, m.stream);
      for (int i = 0; i < reps; ++i) transport.all_to_all(collective, 0);
      for (const Member& m : members) m.device->record(m.stop, m.stream);
      transport.wait_for(devices);
      double worst = 0;
      for (const Member& m : members)
        worst = std::max(worst, static_cast<double>(m.device->elapsed_ms(m.start, m.stop)) * 1e6);
      return worst / reps;
    };
    for (int i = 0; i < o.warmup; ++i) transport.all_to_all(collective, 0);
    const double once = timed(1);
    const double wanted = std::ceil(o.min_time_ms * 1e6 / std::max(once, 1.0));
    const int reps = static_cast<int>(std::clamp(wanted, static_cast<double>(o.min_reps), static_cast<double>(o.max_reps)));
    const double t = timed(reps);
    points.push_back(AllToAllPoint{b, t});
    if (o.progress)
      o.progress(std::to_string(b) + " bytes per peer: " + std::to_string(t / 1e3) + " us (" + std::to_string(reps) + " reps)");
  }
  return points;
}

}  // namespace moesim::runtime
