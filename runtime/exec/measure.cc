#include "runtime/exec/measure.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/comm/loopback.h"
#include "runtime/exec/layer_executor.h"
#include "runtime/exec/reference_check.h"
#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/report/metrics.h"
#include "sim/report/report.h"

namespace moesim::runtime {

namespace {

// The devices and transport for a rank mode.
struct Devices {
  std::vector<std::unique_ptr<DeviceOps>> owned;
  std::vector<ExecutorRank> ranks;
  std::unique_ptr<Transport> transport;
};

Devices open_devices(const MeasureRequest& req, DeviceProvider& provider) {
  Devices d;
  if (req.ranks == 1 || req.loopback) {
    d.owned.push_back(provider.open(0));
    for (int r = 0; r < req.ranks; ++r) d.ranks.push_back(ExecutorRank{r, d.owned[0].get()});
    d.transport = std::make_unique<LoopbackTransport>(*d.owned[0], req.ranks);
    return d;
  }
  if (provider.num_devices() < req.ranks)
    throw InputError("--ranks " + std::to_string(req.ranks) + " needs " + std::to_string(req.ranks) +
                     " devices, this process sees " + std::to_string(provider.num_devices()) +
                     " (use --loopback to run the ranks on one device)");
  std::vector<DeviceOps*> raw;
  for (int r = 0; r < req.ranks; ++r) {
    d.owned.push_back(provider.open(r));
    raw.push_back(d.owned.back().get());
    d.ranks.push_back(ExecutorRank{r, raw.back()});
  }
  d.transport = provider.multi_device_transport(raw);
  return d;
}

TaskGraph full_graph(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) {
  BuildOptions options;
  options.representative_rank = false;
  return build_moe_graph(model, cluster, run, build_options_for(cluster, options));
}

// The --check configuration: the model's routing, activation and dtypes at d_model 64, d_ffn 128,
// with enough tokens for a capacity of 4 slots per chunk.
CheckReport run_check(const MeasureRequest& req, DeviceProvider& provider, RunSpec run) {
  ModelSpec small = req.model;
  small.d_model = 64;
  small.d_ffn = 128;
  const double per_token = small.top_k * small.capacity_factor / small.num_experts;
  run.tokens_per_gpu = static_cast<std::int64_t>(std::ceil(4.0 * run.num_chunks / per_token)) + 1;
  const TaskGraph graph = full_graph(small, req.cluster, run);
  const LayerDims dims = derive_layer_dims(small, req.cluster, run);
  Devices devices = open_devices(req, provider);
  LayerExecutor exec(graph, small, dims, devices.ranks, *devices.transport, ExecutorOptions{run.seed, false});
  exec.initialize();
  exec.run_step();
  return check_against_reference(exec, small, dims);
}

double us(TimeNs ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

MeasureResult measure(const MeasureRequest& req, DeviceProvider& provider) {
  const std::string reason = provider.unavailable_reason();
  if (!reason.empty()) throw InputError("`moesim run` needs a GPU, and none is usable: " + reason);
  if (req.ranks < 1) throw InputError("--ranks must be at least 1, got " + std::to_string(req.ranks));
  if (req.iters < 1 || req.warmup < 0)
    throw InputError("--iters must be at least 1 and --warmup at least 0");
  RunSpec run = req.run;
  run.ep_size = req.ranks;
  run.num_moe_layers = 1;
  const LayerDims dims = derive_layer_dims(req.model, req.cluster, run);
  const TaskGraph graph = full_graph(req.model, req.cluster, run);

  MeasureResult result;
  std::ostringstream text;
  text << "# moesim run: " << req.model.name << ", " << req.ranks << " rank(s)" << (req.loopback ? " (loopback)" : "")
       << ", B=" << dims.tokens << ", n=" << dims.num_chunks << ", strategy " << to_string(run.strategy) << ", "
       << to_string(req.model.dtype) << " storage, " << to_string(req.model.gemm_dtype) << " GEMMs\n";
  text << "# device: " << provider.describe(0) << "\n";

  nlohmann::ordered_json check_json;
  if (req.check) {
    const CheckReport check = run_check(req, provider, run);
    result.check_passed = check.ok();
    text << "check against the CPU reference (d_model 64, d_ffn 128): " << (check.ok() ? "passed" : "FAILED")
         << ", worst error / tolerance " << check.worst_ratio() << ", top-k margin " << check.topk_margin << "\n";
    nlohmann::ordered_json entries = nlohmann::ordered_json::array();
    for (const CheckEntry& e : check.entries) {
      if (!e.ok()) text << "  mismatch: " << e.tensor << " " << e.relative << " > " << e.tolerance << "\n";
      entries.push_back({{"tensor", e.tensor}, {"relative", e.relative}, {"tolerance", e.tolerance}, {"ok", e.ok()}});
    }
    check_json = {{"passed", check.ok()}, {"topk_margin", check.topk_margin}, {"entries", entries}};
  }

  Devices devices = open_devices(req, provider);
  LayerExecutor exec(graph, req.model, dims, devices.ranks, *devices.transport, ExecutorOptions{run.seed, false});
  exec.initialize();
  for (int i = 0; i < req.warmup; ++i) exec.run_step();
  std::vector<std::pair<TimeNs, Trace>> steps;
  for (int i = 0; i < req.iters; ++i) {
    Trace t = exec.run_step();
    steps.emplace_back(t.makespan_ns(), std::move(t));
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const Trace& median = steps[steps.size() / 2].second;

  const EngineRun predicted = simulate_graph(graph, req.cluster, NetworkChoice{run.network, run.all_to_all});
  const StepMetrics measured_metrics = compute_step_metrics(graph, median);
  const StepMetrics predicted_metrics = compute_step_metrics(graph, predicted.trace);
  const RankMemoryUse mem = exec.memory(exec.local_ranks().front());
  const RankMemory* sim_mem = peak_memory_rank(predicted.memory);
  const std::int64_t predicted_peak = sim_mem != nullptr ? sim_mem->peak_device_bytes : 0;

  text << std::fixed << std::setprecision(1);
  text << "step time (us): min " << us(steps.front().first) << "  median " << us(steps[steps.size() / 2].first)
       << "  max " << us(steps.back().first) << "  (" << req.iters << " steps after " << req.warmup
       << " warm-up)   simulated " << us(predicted_metrics.step_ns) << "\n";
  text << "forward / backward (us, median step): " << us(measured_metrics.forward_ns) << " / "
       << us(measured_metrics.backward_ns) << "   simulated " << us(predicted_metrics.forward_ns) << " / "
       << us(predicted_metrics.backward_ns) << "\n";
  const auto mib = [](std::int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  text << "device memory of rank " << exec.local_ranks().front() << " (MiB): arena " << mib(mem.arena_bytes)
       << " + executor workspace " << mib(mem.workspace_bytes) << " + cuBLAS workspace " << mib(mem.library_bytes)
       << " = " << mib(mem.device_bytes()) << "   simulated peak " << mib(predicted_peak) << "\n";
  result.summary = text.str();

  const std::string transport = devices.transport->name();
  const ReportInputs in{req.model, req.cluster, run, dims, graph, median, measured_metrics, predicted.memory,
                        req.tool_version, "measured (" + transport + " transport)"};
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(report_json(in));
  std::vector<double> times;
  for (const auto& s : steps) times.push_back(us(s.first));
  j["measured"] = {{"device", provider.describe(0)},
                   {"ranks", req.ranks},
                   {"transport", transport},
                   {"iters", req.iters},
                   {"warmup", req.warmup},
                   {"step_time_us", {{"min", times.front()}, {"median", times[times.size() / 2]}, {"max", times.back()}}},
                   {"simulated_step_time_us", us(predicted_metrics.step_ns)},
                   {"memory",
                    {{"rank", exec.local_ranks().front()},
                     {"arena_bytes", mem.arena_bytes},
                     {"host_arena_bytes", mem.host_arena_bytes},
                     {"executor_workspace_bytes", mem.workspace_bytes},
                     {"library_workspace_bytes", mem.library_bytes},
                     {"device_bytes", mem.device_bytes()},
                     {"simulated_peak_bytes", predicted_peak}}}};
  if (req.check) j["measured"]["check"] = check_json;
  result.json = j.dump(2) + "\n";
  result.trace = perfetto_trace_json(graph, median);
  return result;
}

}  // namespace moesim::runtime
