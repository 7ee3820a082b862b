// `moesim run` without the command line: run the MoE layer's graph (built by the layer above,
// RunGraphSource) on the devices a DeviceProvider gives (CUDA GPUs in the moesim binary; HostDevice in tests), time it like a
// benchmark tool (warm-up steps dropped, min / median / max of the timed steps), optionally check
// the numerics against the CPU reference at a small size. What it returns is the measurement
// alone; validate/measured_run.h reports it next to the simulator's prediction for the same
// graph, so that the runtime links no engine, cost model or report (docs/architecture.md).
//
// Rank modes: one rank on one device; --loopback: N virtual ranks on one device; N ranks on N
// devices of this process through the provider's NCCL transport (ncclCommInitAll); one rank per
// process of a ProcessGroup (mpirun -np N), each on the GPU of its rank on its host, the NCCL ids
// broadcast over the group, every rank's trace and (for --check) tensors merged at rank 0.
// Plain C++: the CUDA parts are behind DeviceProvider (cuda_device.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/process_group.h"
#include "runtime/comm/transport.h"
#include "runtime/exec/device.h"
#include "runtime/exec/layer_executor.h"
#include "runtime/exec/reference_check.h"
#include "sim/build/layer_dims.h"
#include "sim/core/units.h"
#include "sim/graph/task_graph.h"
#include "sim/graph/trace.h"
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

// What a run takes from the simulator above the runtime, which the runtime does not link:
// validate/measured_run.h implements it with the simulator's own build options and
// configuration view, so that the measured graph is the one the prediction prices.
class RunGraphSource {
 public:
  virtual ~RunGraphSource() = default;
  // InputError when the run could not be reported (checked before any device work).
  virtual void check_reportable(const ModelSpec& model, const RunSpec& run) const = 0;
  // The run's task graph, every rank's tasks in it, as the simulation of `cluster` builds it.
  virtual TaskGraph graph(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) const = 0;
  // The resolved configuration as text: every process of a launch must resolve the same.
  virtual std::string configuration(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                                    const LayerDims& dims) const = 0;
};

struct MeasuredStep {
  TimeNs makespan_ns = 0;
  Trace trace;  // every rank's tasks, timed from the step's origin
};

struct MeasuredRun {
  bool check_passed = true;  // false when --check found a mismatch (on every process)
  // Whether this process reports the run (rank 0 of a process group; every single-process run).
  // Elsewhere the fields below `exit_code` are left empty.
  bool reports = true;
  // 0; 3 when --check found a mismatch; 2 on a process whose input was fine while another
  // process rejected its own (that process, or rank 0, said why).
  int exit_code = 0;

  RunSpec run;          // the request's, ep_size the ranks that ran
  ClusterSpec cluster;  // the hardware the run describes: with --loopback its GPU shared by the ranks
  LayerDims dims;
  std::optional<TaskGraph> graph;  // what ran
  std::vector<MeasuredStep> steps;  // the timed steps, fastest first
  std::string device;     // the device the report describes
  std::string transport;  // the transport's name
  int processes = 1;
  std::optional<CheckReport> check;  // with --check
  int memory_rank = 0;               // the rank whose memory is given (this process's first)
  RankMemoryUse memory;
  // --loopback: the virtual ranks' arenas and workspaces plus the library's workspace once.
  std::int64_t loopback_device_bytes = 0;

  const MeasuredStep& median() const { return steps[steps.size() / 2]; }
};

// Throws InputError when no device is usable (the reason), for a configuration the executor
// cannot run, or when the devices are fewer than the ranks asked for. In a process group these
// checks run on every process before any device work; a failure after that (a device error, out
// of memory) is printed with the process's rank and ends every process (ProcessGroup::abort), so
// none is left waiting in a collective.
MeasuredRun measure(const MeasureRequest& request, DeviceProvider& provider, const RunGraphSource& graphs);

// From every process's device identity, in rank order ("host: GPU <pci bus id>"): the error naming
// the processes given the same device, or "" when each has its own. measure() checks it in a
// process group before any device work.
std::string processes_sharing_a_device(const std::vector<std::string>& identities);
// From every process's configuration fingerprint, in rank order: the error naming the processes
// whose configuration differs from rank 0's, or "". Checked together with the devices.
std::string processes_configured_differently(const std::vector<std::uint64_t>& fingerprints);

}  // namespace moesim::runtime
