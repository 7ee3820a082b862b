// The all-to-all micro-benchmark behind `moesim calibrate --collectives`: the MoE layer's
// collective, measured through the runtime's own transport (NCCL across this process's GPUs) at
// growing message sizes, as the points that sim/driver/network_calibration.h fits the node's
// network to. Written against DeviceOps and Transport: GPUs and NCCL in `moesim calibrate`, the
// host emulation and a modelled transport in the tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/comm/transport.h"
#include "runtime/exec/layer_executor.h"
#include "sim/spec/all_to_all_point.h"

namespace moesim::runtime {

struct AllToAllCalibrationOptions {
  // Bytes each rank sends to each peer, ascending: from latency-bound to bandwidth-bound.
  std::vector<std::int64_t> bytes_per_peer = {256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int warmup = 2;
  int min_reps = 3;
  int max_reps = 200;
  double min_time_ms = 2.0;  // per size, unless max_reps come first
  std::function<void(const std::string&)> progress;  // a line per size; may be empty
};

// Times pairwise all-to-alls of every size among `ranks` (every member of the transport's group,
// all driven by this process): back-to-back collectives between events on each member's stream,
// the time of one being the slowest member's elapsed time over the repetitions. As in nccl-tests,
// the collectives are issued as they go: where the host issues them slower than the GPUs finish
// them (the smallest sizes), that rate is what is measured, as it is what a training step sees. Throws InputError
// for fewer than 2 ranks, ranks that are not the whole group, or sizes that are not positive and
// ascending, before touching a device.
std::vector<AllToAllPoint> measure_all_to_all(Transport& transport, const std::vector<ExecutorRank>& ranks,
                                              const AllToAllCalibrationOptions& options);

}  // namespace moesim::runtime
