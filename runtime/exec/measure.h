// `moesim run` without the command line: build the MoE layer's graph, run it on the devices a
// DeviceProvider gives (CUDA GPUs in the moesim binary; HostDevice in tests), time it like a
// benchmark tool (warm-up steps dropped, min / median / max of the timed steps), optionally check
// the numerics against the CPU reference at a small size, and report the measured step next to
// the simulator's prediction for the same graph.
//
// Rank modes: one rank on one device; --loopback: N virtual ranks on one device; N ranks on N
// devices of this process through the provider's NCCL transport (ncclCommInitAll); one rank per
// process of a ProcessGroup (mpirun -np N), each on the GPU of its rank on its host, the NCCL ids
// broadcast over the group, every rank's trace and (for --check) tensors merged at rank 0.
// Plain C++: the CUDA parts are behind DeviceProvider (cuda_device.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/process_group.h"
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
  // The processes of an MPI launch (nullptr or size 1: this process alone). With more than one,
  // each process is one rank and `ranks` must be 1 (the default) or the group's size.
  ProcessGroup* processes = nullptr;
};

struct MeasureResult {
  std::string summary;  // the human-readable report
  std::string json;     // the simulator's --json schema with the measured trace, plus "measured"
  std::string trace;    // Chrome / Perfetto trace of the median step
  bool check_passed = true;  // false when --check found a mismatch (on every process)
  // Whether this process writes the summary and files (rank 0 of a process group; every
  // single-process run). Elsewhere summary, json and trace are empty.
  bool reports = true;
  // 0; 3 when --check found a mismatch; 2 on a process whose input was fine while another
  // process rejected its own (that process, or rank 0, said why).
  int exit_code = 0;
};

// Throws InputError when no device is usable (the reason), for a configuration the executor
// cannot run, or when the devices are fewer than the ranks asked for. In a process group these
// checks run on every process before any device work; a failure after that (a device error, out
// of memory) is printed with the process's rank and ends every process (ProcessGroup::abort), so
// none is left waiting in a collective.
MeasureResult measure(const MeasureRequest& request, DeviceProvider& provider);

// From every process's device identity, in rank order ("host: GPU <pci bus id>"): the error naming
// the processes given the same device, or "" when each has its own. measure() checks it in a
// process group before any device work.
std::string processes_sharing_a_device(const std::vector<std::string>& identities);
// From every process's configuration fingerprint, in rank order: the error naming the processes
// whose configuration differs from rank 0's, or "". Checked together with the devices.
std::string processes_configured_differently(const std::vector<std::uint64_t>& fingerprints);

}  // namespace moesim::runtime
