#include "sim/cli/simulate_command.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/cluster_flags.h"
#include "sim/cli/memory_limit_flag.h"
#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/driver/footprint.h"
#include "sim/driver/simulation.h"
#include "sim/graph/graph_algorithms.h"
#include "sim/graph/graph_json.h"
#include "sim/graph/operand_check.h"
#include "sim/memory/model_memory.h"
#include "sim/report/report.h"
#include "sim/report/timeline.h"
#include "sim/spec/loader.h"
#include "sim/spec/presets.h"

namespace moesim::cli {
namespace {

// Wall-clock phases for --timing (stderr).
class PhaseTimer {
 public:
  void mark(const std::string& phase) {
    const auto now = std::chrono::steady_clock::now();
    phases_.emplace_back(phase, std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }
  void print(std::ostream& out) const {
    double total = 0;
    for (const auto& [name, ms] : phases_) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "timing: %-10s %9.3f ms\n", name.c_str(), ms);
      out << buf;
      total += ms;
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, "timing: %-10s %9.3f ms\n", "total", total);
    out << buf;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, double>> phases_;
};

// Merges the run file (if any) with the flags into a.run; flags given on the command line win.
void resolve_step_args(StepArgs& a) {
  RunFile file;
  if (!a.run_path.empty()) {
    file = load_run_spec(a.run_path);
    if (!a.given("--model") && file.model_path) a.model_path = *file.model_path;
    if (!a.given("--hardware") && file.hardware_path) a.hardware_path = *file.hardware_path;
  }
  a.run = file.run;
  a.options.apply(a.run);
  if (a.model_path.empty()) throw InputError("--model is required (or model: in a --run file)");
  if (a.hardware_path.empty()) throw InputError("--hardware is required (or hardware: in a --run file)");
  a.model_path = resolve_model_arg(a.model_path, "--model");
  a.hardware_path = resolve_hardware_arg(a.hardware_path, "--hardware");
  if (a.run_path.empty() && !a.options.given_key("tokens_per_gpu"))
    throw InputError("--tokens is required (or tokens_per_gpu: in a --run file)");
  check_no_dtd_flag(a.options.switched_on("drop_duplicate_tokens"), a.run.tp_size);
}

// The hardware the step runs on: the file (with its calibration), or with --loopback its GPU
// shared by the job's ranks (--ep, or every GPU of the file).
ClusterSpec load_step_cluster(const StepArgs& a) {
  ClusterSpec cluster = scaled_cluster(load_hardware_spec(a.hardware_path, a.calibration_path), a.gpus, a.nodes);
  if (!a.loopback) return cluster;
  return loopback_cluster(cluster, a.run.ep_size > 0 ? a.run.ep_size : cluster.num_gpus());
}

}  // namespace

int run_simulate(StepArgs& a, const SimulateOutputs& outputs, const std::string& version) {
  const std::string& json_path = outputs.json_path;
  const std::string& trace_path = outputs.trace_path;
  const std::string& timeline_path = outputs.timeline_path;
  check_outputs({{"--json", json_path}, {"--trace", trace_path}, {"--timeline", timeline_path}});
  PhaseTimer timer;
  const std::int64_t memory_limit = memory_limit_from_flag(a.memory_limit);
  resolve_step_args(a);
  const ModelSpec model = load_model_spec(a.model_path);
  const ClusterSpec cluster = load_step_cluster(a);
  const RunSpec& run = a.run;
  check_simulated_layers(model, run.num_moe_layers);
  timer.mark("load");
  BuildOptions options;
  options.representative_rank = !a.all_ranks;
  options.all_replicas = a.all_ranks;
  options = build_options_for(cluster, run, options);
  const LayerDims dims = derive_layer_dims(model, cluster, run);
  check_memory_limit(estimate_footprint(dims, run, options), 1, memory_limit, "the simulation");
  const std::optional<RoutingPlan> routing = make_layer_routing(dims, run);
  const RoutingStats routing_stats = routing ? routing->stats() : uniform_routing_stats(routing_shape(dims));
  timer.mark("routing");
  const TaskGraph graph = build_moe_graph(model, cluster, run, options, routing ? &*routing : nullptr);
  timer.mark("build");
  const EngineRun result = simulate_graph(graph, cluster, NetworkChoice{run.network, run.all_to_all, run.compute});
  const Trace& trace = result.trace;
  timer.mark("simulate");
  const StepMetrics metrics = compute_step_metrics(graph, trace);
  // (Auto picks PipeMoE's costs from the hardware file, --compute or the run file by name.)
  const std::string network =
      resolve_compute_model(cluster, run.compute) == ComputeModel::kPipeMoeAlphaBeta
          ? std::string(run.compute == ComputeModel::kAuto ? "pure alpha-beta costs (hardware alpha_beta.simulate)"
                                                           : "pure alpha-beta costs (compute pipemoe-alpha-beta)")
          : std::string(to_string(resolve_network_model(cluster, run.network))) + " model, " +
                std::string(to_string(run.all_to_all)) + " all-to-all";
  const ReportInputs in{model, cluster, run, dims, graph, trace, metrics, result.memory, version, network,
                        &routing_stats};
  std::ostringstream summary;
  write_summary(summary, in);
  // When a machine-readable output goes to stdout, the summary moves to stderr.
  const bool stdout_taken = json_path == "-" || trace_path == "-" || timeline_path == "-";
  (stdout_taken ? std::cerr : std::cout) << summary.str();
  if (!json_path.empty()) write_output("--json", json_path, report_json(in));
  if (!trace_path.empty()) write_output("--trace", trace_path, perfetto_trace_json(graph, trace, result.memory));
  if (!timeline_path.empty()) {
    std::ostringstream timeline;
    write_timeline(timeline, graph, trace, result.memory);
    write_output("--timeline", timeline_path, timeline.str());
  }
  timer.mark("report");
  if (outputs.timing) {
    std::cout.flush();  // keep the summary ahead of the timing lines on a shared terminal
    std::cerr << "timing: " << graph.num_tasks() << " tasks on " << graph.simulated_ranks().size()
              << " simulated rank(s)\n";
    timer.print(std::cerr);
  }
  return 0;
}

int run_graph_export(StepArgs& a, const std::string& out_path) {
  check_outputs({{"--output", out_path}});
  const std::int64_t memory_limit = memory_limit_from_flag(a.memory_limit);
  resolve_step_args(a);
  const ModelSpec model = load_model_spec(a.model_path);
  const ClusterSpec cluster = load_step_cluster(a);
  const RunSpec& run = a.run;
  BuildOptions options;
  options.representative_rank = !a.all_ranks;
  options.all_replicas = a.all_ranks;
  options = build_options_for(cluster, run, options);
  check_memory_limit(estimate_footprint(derive_layer_dims(model, cluster, run), run, options), 1, memory_limit,
                     "the graph");
  const TaskGraph graph = build_moe_graph(model, cluster, run, options);
  write_output("--output", out_path, export_graph_json(graph));
  return 0;
}

// Acyclic, and every operand access ordered against its buffer's life and the conflicting
// accesses (operand_check.h), for graphs small enough for that check.
int run_graph_check(const std::string& path) {
  const TaskGraph graph = load_graph_json(path);
  check_acyclic(graph);
  std::size_t operands = 0;
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) operands += graph.task(i).reads.size() + graph.task(i).writes.size();
  std::string operand_note = operands == 0 ? "no operand bindings" : std::to_string(operands) + " operand accesses ordered";
  if (operands > 0 && graph.num_tasks() > kMaxOperandCheckTasks) {
    operand_note = std::to_string(operands) + " operand accesses not checked (above " +
                   std::to_string(kMaxOperandCheckTasks) + " tasks)";
  } else if (operands > 0) {
    const std::vector<std::string> violations = operand_violations(graph, 5);
    if (!violations.empty()) {
      std::string rule =
          "operand accesses no path of the graph orders (two tasks touching the same bytes, one of them "
          "writing, need a path between them; an access needs one from its buffer's allocation and to its "
          "release): ";
      for (std::size_t i = 0; i < violations.size(); ++i) rule += (i > 0 ? "; " : "") + violations[i];
      throw InputError(SourceLocation{path, 0, 0}, rule);
    }
  }
  std::cout << path << ": " << graph.num_tasks() << " tasks, " << graph.edges().size()
            << " edges, " << graph.simulated_ranks().size() << " simulated rank(s) of "
            << graph.world_size() << ", acyclic, " << operand_note << "\n";
  return 0;
}

}  // namespace moesim::cli
