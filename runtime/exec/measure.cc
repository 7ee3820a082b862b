#include "runtime/exec/measure.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>

#include "runtime/comm/loopback.h"
#include "runtime/exec/layer_executor.h"
#include "runtime/exec/rank_values_io.h"
#include "runtime/exec/reference_check.h"
#include "sim/core/error.h"

#include <unistd.h>

namespace moesim::runtime {

namespace {

// The devices and transport for a rank mode.
struct Devices {
  std::vector<std::unique_ptr<DeviceOps>> owned;
  std::vector<ExecutorRank> ranks;
  std::unique_ptr<Transport> transport;
};

// The processes of the run when there is more than one, else nullptr.
ProcessGroup* multi_process(const MeasureRequest& req) {
  return req.processes != nullptr && req.processes->size() > 1 ? req.processes : nullptr;
}

// The device a process of a group takes: its rank among the processes of its host, or the only
// device it sees when the launcher gives each process its own (CUDA_VISIBLE_DEVICES per rank).
int process_device(const ProcessGroup& group, int devices) {
  if (devices == 1) return 0;
  if (group.local_rank() < devices) return group.local_rank();
  throw InputError("process " + std::to_string(group.rank()) + " is number " + std::to_string(group.local_rank()) +
                   " on its host, which shows it only " + std::to_string(devices) +
                   " GPUs: start at most one process per GPU on each host");
}

// This host's name and the device's identity on it.
std::string identity_of_device(const DeviceProvider& provider, int ordinal) {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown host");
  return std::string(host) + ": " + provider.identity(ordinal);  // the host disambiguates emulated devices
}

// Gathers every process's configuration fingerprint and device identity at rank 0; there, the
// error naming processes whose configuration differs from rank 0's or that share a device (empty
// elsewhere and when all is well).
std::string group_input_error(ProcessGroup& group, std::uint64_t fingerprint, const std::string& identity) {
  std::vector<std::byte> bytes(sizeof fingerprint + identity.size());
  std::memcpy(bytes.data(), &fingerprint, sizeof fingerprint);
  std::memcpy(bytes.data() + sizeof fingerprint, identity.data(), identity.size());
  const std::vector<std::vector<std::byte>> all = group.gather(bytes, 0);
  if (group.rank() != 0) return "";
  std::vector<std::uint64_t> fingerprints;
  std::vector<std::string> identities;
  for (const auto& b : all) {
    MOESIM_CHECK(b.size() >= sizeof fingerprint, "every process sends its configuration fingerprint");
    std::uint64_t f = 0;
    std::memcpy(&f, b.data(), sizeof f);
    fingerprints.push_back(f);
    identities.emplace_back(reinterpret_cast<const char*>(b.data()) + sizeof f, b.size() - sizeof f);
  }
  const std::string differ = processes_configured_differently(fingerprints);
  return differ.empty() ? processes_sharing_a_device(identities) : differ;
}

// FNV-1a over the resolved configuration every process must share (the sizes NCCL exchanges
// follow from it), the run's options and the build.
std::uint64_t configuration_fingerprint(const MeasureRequest& req, const std::string& configuration,
                                        const RunSpec& run) {
  const std::string text = configuration + "|iters " + std::to_string(req.iters) + "|warmup " +
                           std::to_string(req.warmup) + "|check " + std::to_string(req.check) + "|seed " +
                           std::to_string(run.seed) + "|build " + req.tool_version;
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ULL;
  return h;
}

// `ordinal`: the device of this process in a group (Prepared::device).
Devices open_devices(const MeasureRequest& req, DeviceProvider& provider, int ordinal) {
  Devices d;
  if (ProcessGroup* group = multi_process(req)) {
    d.owned.push_back(provider.open(ordinal));
    d.ranks.push_back(ExecutorRank{group->rank(), d.owned[0].get()});
    d.transport = provider.process_transport(d.owned[0].get(), *group);
    return d;
  }
  if (req.ranks == 1 || req.loopback) {
    d.owned.push_back(provider.open(0));
    for (int r = 0; r < req.ranks; ++r) d.ranks.push_back(ExecutorRank{r, d.owned[0].get()});
    d.transport = std::make_unique<LoopbackTransport>(*d.owned[0], req.ranks);
    return d;
  }
  std::vector<DeviceOps*> raw;
  for (int r = 0; r < req.ranks; ++r) {
    d.owned.push_back(provider.open(r));
    raw.push_back(d.owned.back().get());
    d.ranks.push_back(ExecutorRank{r, raw.back()});
  }
  d.transport = provider.multi_device_transport(raw);
  return d;
}

// One trace of the step from every process's: each holds its own rank's records (the others'
// stay -1), timed from its own origin event (the processes start each step together after a
// barrier). The element-wise maximum at rank 0 collects every rank's records, and a collective's
// record becomes that of its latest member, as a single process reports its local members.
Trace merge_at_root(ProcessGroup* group, Trace trace) {
  if (group == nullptr) return trace;
  std::vector<std::int64_t> v;
  v.reserve(trace.records.size() * 3);
  for (const TaskRecord& r : trace.records) v.insert(v.end(), {r.ready_ns, r.start_ns, r.end_ns});
  group->max_to_root(v, 0);
  for (std::size_t i = 0; i < trace.records.size(); ++i)
    trace.records[i] = TaskRecord{v[3 * i], v[3 * i + 1], v[3 * i + 2]};
  return trace;
}

// The --check configuration: the model's routing, activation and dtypes at d_model 64, d_ffn 128,
// with enough tokens for a capacity of 4 slots per chunk. In a process group every rank's
// tensors go to rank 0, which checks them; the other processes return an empty report.
CheckReport run_check(const MeasureRequest& req, const RunGraphSource& graphs, const ClusterSpec& cluster,
                      DeviceProvider& provider, RunSpec run, int ordinal) {
  ModelSpec small = req.model;
  small.d_model = 64;
  small.d_ffn = 128;
  // About 4 slots per expert and chunk, and a capacity the chunks divide (check_equal_chunks):
  // the smallest token count from there whose C is a multiple of n. While a token adds at most
  // one slot (per_token <= 1) C takes every value, so n / per_token tokens reach a multiple; the
  // bound below is four times that, or 4n tokens when a token adds more.
  const double per_token = small.top_k * small.capacity_factor / small.num_experts;
  run.tokens_per_gpu = static_cast<std::int64_t>(std::ceil(4.0 * run.num_chunks / per_token)) + 1;
  const double tries = 4.0 * run.num_chunks * std::max(1.0, std::ceil(1.0 / per_token) + 1.0);
  for (int step = 0; derive_layer_dims(small, cluster, run).capacity % run.num_chunks != 0; ++step) {
    if (step > tries) throw InternalError("no token count near " + std::to_string(run.tokens_per_gpu) +
                                          " gives a capacity that n = " + std::to_string(run.num_chunks) + " divides");
    ++run.tokens_per_gpu;
  }
  const TaskGraph graph = graphs.graph(small, cluster, run);
  const LayerDims dims = derive_layer_dims(small, cluster, run);
  Devices devices = open_devices(req, provider, ordinal);
  LayerExecutor exec(graph, small, dims, devices.ranks, *devices.transport, ExecutorOptions{run.seed, false});
  exec.initialize();
  exec.run_step();
  exec.scramble(run.seed + 1);  // a missing wait would read this noise in the checked step
  exec.run_step();
  ProcessGroup* group = multi_process(req);
  if (group == nullptr) return check_against_reference(exec, small, dims);
  CheckReport report;
  for (int l = 0; l < exec.num_layers(); ++l) {
    const std::vector<std::vector<std::byte>> parts =
        group->gather(pack_rank_values(exec.download(group->rank(), l)), 0);
    if (group->rank() != 0) continue;
    std::vector<RankValues> got;
    for (const auto& part : parts) got.push_back(unpack_rank_values(part));
    append_layer(report, check_against_reference(got, small, dims), l, exec.num_layers());
  }
  return report;
}

// Everything checked before a device is touched (the same on every process of a group).
struct Prepared {
  RunSpec run;
  // The hardware the prediction runs on: the request's, or with --loopback its GPU shared by the
  // virtual ranks (loopback_cluster), so that the simulation describes what was measured.
  ClusterSpec cluster;
  LayerDims dims;
  int device = 0;  // the ordinal described in the report
};

Prepared prepare(const MeasureRequest& req, DeviceProvider& provider, const RunGraphSource& graphs) {
  const std::string reason = provider.unavailable_reason();
  if (!reason.empty()) throw InputError("`moesim run` needs a GPU, and none is usable: " + reason);
  if (req.ranks < 1) throw InputError("--ranks must be at least 1, got " + std::to_string(req.ranks));
  if (req.iters < 1 || req.warmup < 0) throw InputError("--iters must be at least 1 and --warmup at least 0");
  graphs.check_reportable(req.model, req.run);
  Prepared p;
  p.cluster = run_hardware(req.cluster, req.ranks, req.loopback);
  p.run = req.run;
  p.run.ep_size = req.ranks;
  if (ProcessGroup* group = multi_process(req)) {
    if (req.loopback)
      throw InputError("--loopback runs every rank in one process, but this is one of " +
                       std::to_string(group->size()) + " processes started by an MPI launcher (one rank each); "
                       "drop --loopback or start one process");
    if (req.ranks != 1 && req.ranks != group->size())
      throw InputError("--ranks " + std::to_string(req.ranks) + " differs from the " + std::to_string(group->size()) +
                       " processes the MPI launcher started (one rank each); drop --ranks or make them equal");
    p.run.ep_size = group->size();
    p.device = process_device(*group, provider.num_devices());
  } else if (!req.loopback && req.ranks > provider.num_devices()) {
    throw InputError("--ranks " + std::to_string(req.ranks) + " needs " + std::to_string(req.ranks) +
                     " devices, this process sees " + std::to_string(provider.num_devices()) +
                     " (use --loopback to run the ranks on one device, or mpirun for one process per GPU)");
  }
  p.dims = derive_layer_dims(req.model, p.cluster, p.run);
  return p;
}

MeasuredRun measure_prepared(const MeasureRequest& req, DeviceProvider& provider, const RunGraphSource& graphs,
                             const Prepared& p);

}  // namespace

std::string processes_configured_differently(const std::vector<std::uint64_t>& fingerprints) {
  std::string list;
  int count = 0;
  for (std::size_t r = 1; r < fingerprints.size(); ++r)
    if (fingerprints[r] != fingerprints[0]) {
      list += (count++ == 0 ? "" : ", ") + std::to_string(r);
    }
  if (count == 0) return "";
  return std::string(count == 1 ? "process " : "processes ") + list + (count == 1 ? " was" : " were") +
         " started with a configuration that differs from process 0's (model, hardware and run options, as "
         "resolved from the files and the command line, must be the same on every process)";
}

std::string processes_sharing_a_device(const std::vector<std::string>& identities) {
  std::map<std::string, std::vector<std::size_t>> by_device;
  for (std::size_t r = 0; r < identities.size(); ++r) by_device[identities[r]].push_back(r);
  std::string error;
  for (const auto& [device, ranks] : by_device) {
    if (ranks.size() < 2) continue;
    std::string list;
    for (std::size_t i = 0; i < ranks.size(); ++i)
      list += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
    error += (error.empty() ? "" : "; ") + std::string("processes ") + list + " were given the same device (" + device +
             ")";
  }
  if (!error.empty())
    error += ": NCCL needs one GPU per process; give each process its own (e.g. CUDA_VISIBLE_DEVICES per local "
             "rank, or no more processes per host than GPUs)";
  return error;
}

MeasuredRun measure(const MeasureRequest& req, DeviceProvider& provider, const RunGraphSource& graphs) {
  ProcessGroup* group = multi_process(req);
  if (group == nullptr) return measure_prepared(req, provider, graphs, prepare(req, provider, graphs));

  // Every process checks the same input; the failure is reported once (agree_on_input).
  Prepared p;
  std::string error;
  try {
    p = prepare(req, provider, graphs);
  } catch (const InputError& e) {
    error = e.what();
  }
  // A process that stays quiet exits 0: the reporting process exits 2 and so does the job, and a
  // quiet process exiting non-zero first would let the launcher kill the reporter before it prints.
  MeasuredRun quiet;
  quiet.reports = false;
  quiet.exit_code = 0;
  if (!agree_on_input(group, error)) return quiet;
  // Before any device work: processes started with different configurations (NCCL would hang or
  // exchange wrong sizes) and two processes on one GPU (NCCL does not support two ranks of a
  // communicator on one device: ncclCommInitRank fails or hangs) are input errors. Every process
  // reaches the gather (an identity that cannot be read is reported after it).
  std::string identity;
  try {
    identity = identity_of_device(provider, p.device);
  } catch (const std::exception& e) {
    error = std::string("cannot identify this process's device: ") + e.what();
    identity = "unidentified device of process " + std::to_string(group->rank());
  }
  // Every process's input passed (the first agreement), so p is valid here: its configuration is
  // hashed even where the device identity failed, whose error rank 0 must not mistake for a
  // configuration that differs.
  const std::string configuration = graphs.configuration(req.model, req.cluster, p.run, p.dims);
  const std::string shared =
      group_input_error(*group, configuration_fingerprint(req, configuration, p.run), identity);
  if (error.empty()) error = shared;
  if (!agree_on_input(group, error)) return quiet;
  try {
    return measure_prepared(req, provider, graphs, p);
  } catch (const std::exception& e) {
    std::cerr << "error: process " << group->rank() << " of " << group->size() << ": " << e.what()
              << "\n(ending every process of the job)\n";
    std::cerr.flush();
    group->abort(dynamic_cast<const InputError*>(&e) != nullptr ? 2 : 1);
    throw;  // not reached: abort ends the process
  }
}

namespace {

// Runs --check on every process; rank 0 holds the verdict and shares it.
CheckReport run_and_share_check(const MeasureRequest& req, const RunGraphSource& graphs, DeviceProvider& provider,
                                const Prepared& p, ProcessGroup* group, MeasuredRun& result) {
  CheckReport check = run_check(req, graphs, p.cluster, provider, p.run, p.device);
  int passed = check.ok() ? 1 : 0;
  if (group != nullptr) group->broadcast(&passed, sizeof passed, 0);  // rank 0 holds the verdict
  result.check_passed = passed == 1;
  return check;
}

// Each of req.iters timed steps after req.warmup untimed ones, fastest first.
std::vector<MeasuredStep> timed_steps(const MeasureRequest& req, ProcessGroup* group, LayerExecutor& exec) {
  auto step = [&] {
    if (group != nullptr) group->barrier();  // the processes' origin events as close as the barrier allows
    return merge_at_root(group, exec.run_step());
  };
  for (int i = 0; i < req.warmup; ++i) step();
  std::vector<MeasuredStep> steps;
  for (int i = 0; i < req.iters; ++i) {
    Trace t = step();
    steps.push_back(MeasuredStep{t.makespan_ns(), std::move(t)});
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const MeasuredStep& a, const MeasuredStep& b) { return a.makespan_ns < b.makespan_ns; });
  return steps;
}

// The run's figures of this process's first local rank: with uniform routing every rank holds
// the same buffers. Virtual ranks each have their own arena and workspace on the one GPU;
// cuBLAS's is the device's.
void record_memory(const LayerExecutor& exec, MeasuredRun& result) {
  result.memory_rank = exec.local_ranks().front();
  result.memory = exec.memory(result.memory_rank);
  result.loopback_device_bytes = result.memory.library_bytes;
  for (int r : exec.local_ranks())
    result.loopback_device_bytes += exec.memory(r).arena_bytes + exec.memory(r).workspace_bytes;
}

MeasuredRun measure_prepared(const MeasureRequest& req, DeviceProvider& provider, const RunGraphSource& graphs,
                             const Prepared& p) {
  ProcessGroup* group = multi_process(req);
  MeasuredRun result;
  result.reports = group == nullptr || group->rank() == 0;
  if (req.check) result.check = run_and_share_check(req, graphs, provider, p, group, result);
  result.exit_code = result.check_passed ? 0 : 3;
  result.graph.emplace(graphs.graph(req.model, p.cluster, p.run));
  {
    Devices devices = open_devices(req, provider, p.device);
    // Timed: the arena exactly as the graph's lifetimes need it (nothing is downloaded).
    LayerExecutor exec(*result.graph, req.model, p.dims, devices.ranks, *devices.transport,
                       ExecutorOptions{p.run.seed, false, false});
    exec.initialize();
    result.steps = timed_steps(req, group, exec);
    result.transport = devices.transport->name();
    record_memory(exec, result);
  }
  if (!result.reports) {  // the merged traces and the check's tensors are rank 0's
    MeasuredRun quiet;
    quiet.check_passed = result.check_passed;
    quiet.reports = false;
    quiet.exit_code = result.exit_code;
    return quiet;
  }
  result.run = p.run;
  result.cluster = p.cluster;
  result.dims = p.dims;
  result.device = provider.describe(p.device);
  result.processes = group != nullptr ? group->size() : 1;
  return result;
}

}  // namespace

}  // namespace moesim::runtime
