// `moesim run` without the command line: build the MoE layer's graph, run it on the devices a
// DeviceProvider gives (CUDA GPUs in the moesim binary; HostDevice in tests), time it like a
// benchmark tool (warm-up steps dropped, min / median / max of the timed steps), optionally check
// the numerics against the CPU reference at a small size, and report the measured step next to
// the simulator's prediction for the same graph.
//
// Rank modes: one rank on one device; --loopback: N virtual ranks on one device; N ranks on N
// devices of this process through the provider's NCCL transport (ncclCommInitAll).
// Plain C++: the CUDA parts are behind DeviceProvider (cuda_device.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/transport.h"
#include "runtime/exec/device.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim::runtime {

struct MeasureRequest {
  ModelSpec model;
  ClusterSpec cluster;
  RunSpec run;           // ep_size is set from `ranks`
  int ranks = 1;
  bool loopback = false;
  int iters = 20;
  int warmup = 5;
  bool check = false;
  std::string tool_version;
};

struct MeasureResult {
  std::string summary;  // the human-readable report
  std::string json;     // the simulator's --json schema with the measured trace, plus "measured"
  std::string trace;    // Chrome / Perfetto trace of the median step
  bool check_passed = true;  // false when --check found a mismatch
};

// Throws InputError when no device is usable (the reason), for a configuration the executor
// cannot run, or when the devices are fewer than the ranks asked for.
MeasureResult measure(const MeasureRequest& request, DeviceProvider& provider);

}  // namespace moesim::runtime
