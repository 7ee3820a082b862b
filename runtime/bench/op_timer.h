// What the calibration micro-benchmarks share: the check of a list of sizes, a timer of operations
// issued back to back on one stream (CUDA events around them, after a warm-up), the speed of one
// operation beside another stream's, and device memory that frees itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "runtime/bench/calibrate.h"
#include "runtime/exec/device.h"
#include "sim/core/error.h"

namespace moesim::runtime {

// A list of sizes that must be at least `smallest` and strictly increasing; `item` and `items` name
// one and the list in the message.
inline void check_axis(const std::vector<std::int64_t>& axis, const std::string& item, const std::string& items,
                std::int64_t smallest = 1) {
  for (std::size_t i = 0; i < axis.size(); ++i) {
    if (axis[i] < smallest)
      throw InputError("calibration: " + item + " " + std::to_string(axis[i]) +
                       (smallest == 1 ? " must be positive" : " must be at least " + std::to_string(smallest)));
    if (i > 0 && axis[i] <= axis[i - 1]) {
      throw InputError("calibration: " + items + " must be strictly increasing; " + std::to_string(axis[i]) +
                       " follows " + std::to_string(axis[i - 1]));
    }
  }
}

// Times operations issued back to back on one stream of the device.
class OpTimer {
 public:
  OpTimer(DeviceOps& device, const CalibrationOptions& options)
      : device_(device),
        options_(options),
        stream_(device.create_stream()),
        start_(device.create_event(true)),
        stop_(device.create_event(true)) {}

  int stream() const { return stream_; }

  // Time per operation in ns: warm-up, one timed run to size the repetitions, then the timed
  // repetitions.
  double per_op_ns(const std::function<void()>& op) {
    for (int i = 0; i < options_.warmup; ++i) op();
    return timed(op, reps_for(timed(op, 1)));
  }

  // Repetitions for at least min_time_ms of an operation taking `once_ns`, within [min_reps, max_reps].
  int reps_for(double once_ns) const {
    const double wanted = options_.min_time_ms * 1e6;
    const double reps = once_ns > 0 ? std::ceil(wanted / once_ns) : options_.max_reps;
    return static_cast<int>(
        std::clamp(reps, static_cast<double>(options_.min_reps), static_cast<double>(options_.max_reps)));
  }

  // Time per operation in ns over `reps` operations issued back to back.
  double timed(const std::function<void()>& op, int reps) {
    device_.record(start_, stream_);
    for (int i = 0; i < reps; ++i) op();
    device_.record(stop_, stream_);
    device_.synchronize();
    return static_cast<double>(device_.elapsed_ms(start_, stop_)) * 1e6 / reps;
  }

 private:
  DeviceOps& device_;
  const CalibrationOptions& options_;
  int stream_;
  int start_;
  int stop_;
};

// The speed of `foreground` (on `fg`'s stream) while `background` runs on `bg`'s, as a fraction of
// its speed alone. The background loop is issued first and sized to last `cover` times the
// foreground's timed window alone, so that the window sees it running throughout as long as the
// foreground slows by less than that: a factor below 1 / cover is not resolved (it reads about
// 1 / cover, the rest of the window running alone).
inline double slowdown_factor(OpTimer& fg, const std::function<void(int)>& foreground, OpTimer& bg,
                              const std::function<void(int)>& background, double cover_factor = 3.0) {
  const double alone = fg.per_op_ns([&] { foreground(fg.stream()); });
  const double bg_once = bg.per_op_ns([&] { background(bg.stream()); });
  const int reps = fg.reps_for(alone);
  const double cover = cover_factor * reps * alone;
  const auto bg_reps = static_cast<int>(std::ceil(cover / std::max(bg_once, 1.0)));
  if (bg_reps > 1000000)
    throw InternalError("calibration: the interference background would need " + std::to_string(bg_reps) +
                        " operations; its timing is not usable");
  for (int i = 0; i < bg_reps; ++i) background(bg.stream());
  // timed() synchronizes the device, so the rest of the background ends before anything else runs.
  const double with = fg.timed([&] { foreground(fg.stream()); }, reps);
  return with > 0 ? std::min(1.0, alone / with) : 1.0;
}

// Device memory that frees itself.
class DeviceBuffer {
 public:
  DeviceBuffer(DeviceOps& device, std::int64_t bytes, const char* what, bool pinned = false)
      : device_(device), pinned_(pinned), p_(pinned ? device.alloc_pinned(bytes, what) : device.alloc_device(bytes, what)) {}
  // Never throws: after a sticky CUDA error the frees fail too, and the error being reported is
  // the one that matters.
  ~DeviceBuffer() {
    try {
      pinned_ ? device_.free_pinned(p_) : device_.free_device(p_);
    } catch (const std::exception&) {
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }

 private:
  DeviceOps& device_;
  bool pinned_;
  void* p_;
};

}  // namespace moesim::runtime
