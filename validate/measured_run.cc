#include "validate/measured_run.h"

#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <vector>

#include "sim/build/moe_graph.h"
#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/memory/model_memory.h"
#include "sim/report/metrics.h"
#include "sim/report/report.h"
#include "sim/report/spec_json.h"

namespace moesim::validate {

void SimulatorRunGraphs::check_reportable(const ModelSpec& model, const RunSpec& run) const {
  check_simulated_layers(model, run.num_moe_layers);
}

TaskGraph SimulatorRunGraphs::graph(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) const {
  BuildOptions options;
  options.representative_rank = false;
  return build_moe_graph(model, cluster, run, build_options_for(cluster, options));
}

namespace {

void erase_file_names(nlohmann::ordered_json& j) {
  if (j.is_object()) {
    j.erase("file");
    for (auto& [key, value] : j.items()) erase_file_names(value);
  } else if (j.is_array()) {
    for (auto& value : j) erase_file_names(value);
  }
}

}  // namespace

std::string SimulatorRunGraphs::configuration(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                                              const LayerDims& dims) const {
  nlohmann::ordered_json config = config_json(model, cluster, run, dims);
  erase_file_names(config);
  return config.dump();
}

namespace {

using runtime::MeasuredRun;
using runtime::MeasureRequest;

double us(TimeNs ns) { return static_cast<double>(ns) / 1e3; }
double mib(std::int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

// The run's first lines: the configuration, and the device the report describes.
std::string run_heading(const MeasureRequest& req, const MeasuredRun& m) {
  const RunSpec& run = m.run;
  const LayerDims& dims = m.dims;
  std::ostringstream text;
  const std::string mode = m.processes > 1 ? " (one process each)" : req.loopback ? " (loopback)" : "";
  text << "# moesim run: " << req.model.name << ", " << run.ep_size << " rank(s)" << mode << ", B=" << dims.tokens
       << ", n=" << dims.num_chunks << ", " << run.num_moe_layers << " MoE layer(s), strategy " << to_string(run.strategy)
       << ", " << to_string(req.model.dtype) << " storage, " << to_string(req.model.gemm_dtype) << " GEMMs\n";
  text << "# device: " << m.device << "\n";
  return text.str();
}

void write_check_text(std::ostream& text, const runtime::CheckReport& check) {
  text << "check against the CPU reference (d_model 64, d_ffn 128): " << (check.ok() ? "passed" : "FAILED")
       << ", worst error / tolerance " << check.worst_ratio() << ", top-k margin " << check.topk_margin;
  if (check.ambiguous_tokens > 0)
    text << ", " << check.ambiguous_tokens << " near-tied token(s) routed as the devices chose";
  text << "\n";
  for (const runtime::CheckEntry& e : check.entries) {
    if (!e.ok()) text << "  mismatch: " << e.tensor << " " << e.relative << " > " << e.tolerance << "\n";
  }
}

nlohmann::ordered_json check_json(const runtime::CheckReport& check) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const runtime::CheckEntry& e : check.entries) {
    entries.push_back({{"tensor", e.tensor}, {"relative", e.relative}, {"tolerance", e.tolerance}, {"ok", e.ok()}});
  }
  return {{"passed", check.ok()},
          {"topk_margin", check.topk_margin},
          {"ambiguous_tokens", check.ambiguous_tokens},
          {"entries", entries}};
}

// The median measured step next to the simulation of the same graph and hardware.
struct Prediction {
  EngineRun simulated;
  StepMetrics measured_metrics, simulated_metrics;
  std::int64_t simulated_peak = 0;    // the simulated ranks' highest peak
  std::int64_t simulated_device = 0;  // the device's: with --loopback the sum of its ranks' peaks
};

Prediction predict(const MeasuredRun& m) {
  Prediction p;
  p.simulated = simulate_graph(*m.graph, m.cluster, NetworkChoice{m.run.network, m.run.all_to_all});
  p.measured_metrics = compute_step_metrics(*m.graph, m.median().trace);
  p.simulated_metrics = compute_step_metrics(*m.graph, p.simulated.trace);
  const RankMemory* sim_mem = peak_memory_rank(p.simulated.memory);
  p.simulated_peak = sim_mem != nullptr ? sim_mem->peak_device_bytes : 0;
  p.simulated_device = device_peak_bytes(m.cluster, p.simulated.memory);
  return p;
}

void write_comparison(std::ostream& text, const MeasureRequest& req, const MeasuredRun& m, const Prediction& p) {
  text << std::fixed << std::setprecision(1);
  text << "step time (us): min " << us(m.steps.front().makespan_ns) << "  median " << us(m.median().makespan_ns)
       << "  max " << us(m.steps.back().makespan_ns) << "  (" << req.iters << " steps after " << req.warmup
       << " warm-up)   simulated " << us(p.simulated_metrics.step_ns) << "\n";
  text << "forward / backward (us, median step): " << us(p.measured_metrics.forward_ns) << " / "
       << us(p.measured_metrics.backward_ns) << "   simulated " << us(p.simulated_metrics.forward_ns) << " / "
       << us(p.simulated_metrics.backward_ns) << "\n";
  text << "device memory of rank " << m.memory_rank << " (MiB): arena " << mib(m.memory.arena_bytes)
       << " + executor workspace " << mib(m.memory.workspace_bytes) << " + cuBLAS workspace "
       << mib(m.memory.library_bytes) << " = " << mib(m.memory.device_bytes()) << "   simulated peak "
       << mib(p.simulated_peak) << "\n";
  if (m.cluster.node.loopback)
    text << "device memory of the " << m.run.ep_size << " virtual ranks (MiB): " << mib(m.loopback_device_bytes)
         << "   simulated " << mib(p.simulated_device) << " (sum of the ranks' peaks)\n";
}

// The report's "measured" section.
nlohmann::ordered_json measured_json(const MeasureRequest& req, const MeasuredRun& m, const Prediction& p) {
  std::vector<double> times;
  for (const auto& s : m.steps) times.push_back(us(s.makespan_ns));
  nlohmann::ordered_json j = {
      {"device", m.device},
      {"ranks", m.run.ep_size},
      {"processes", m.processes},
      {"transport", m.transport},
      {"iters", req.iters},
      {"warmup", req.warmup},
      {"step_time_us", {{"min", times.front()}, {"median", times[times.size() / 2]}, {"max", times.back()}}},
      {"simulated_step_time_us", us(p.simulated_metrics.step_ns)},
      {"memory",
       {{"rank", m.memory_rank},
        {"arena_bytes", m.memory.arena_bytes},
        {"host_arena_bytes", m.memory.host_arena_bytes},
        {"executor_workspace_bytes", m.memory.workspace_bytes},
        {"library_workspace_bytes", m.memory.library_bytes},
        {"device_bytes", m.memory.device_bytes()},
        {"simulated_peak_bytes", p.simulated_peak}}}};
  if (m.cluster.node.loopback) {
    j["memory"]["loopback_device_bytes"] = m.loopback_device_bytes;
    j["memory"]["simulated_device_peak_bytes"] = p.simulated_device;
  }
  if (m.check) j["check"] = check_json(*m.check);
  return j;
}

}  // namespace

MeasuredReport report_measured_run(const MeasureRequest& req, const MeasuredRun& m) {
  MOESIM_CHECK(m.reports && m.graph && !m.steps.empty(), "only the reporting process's run, with its timed steps, is reported");
  std::ostringstream text;
  text << run_heading(req, m);
  if (m.check) write_check_text(text, *m.check);
  const Prediction p = predict(m);
  write_comparison(text, req, m, p);

  MeasuredReport report;
  report.summary = text.str();
  const runtime::MeasuredStep& median = m.median();
  const ReportInputs in{req.model,          m.cluster,           m.run,   m.dims, *m.graph, median.trace,
                        p.measured_metrics, p.simulated.memory, req.tool_version,
                        "measured (" + m.transport + " transport)"};
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(report_json(in));
  j["measured"] = measured_json(req, m, p);
  report.json = j.dump(2) + "\n";
  report.trace = perfetto_trace_json(*m.graph, median.trace);
  return report;
}

}  // namespace moesim::validate
