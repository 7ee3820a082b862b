#include "sim/cli/training_step_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "sim/cli/cluster_flags.h"
#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/report/report.h"
#include "sim/report/timeline.h"
#include "sim/spec/loader.h"
#include "sim/spec/presets.h"
#include "sim/spec/run_spec.h"
#include "sim/spec/step_options.h"
#include "sim/step/step_html.h"
#include "sim/step/step_simulation.h"

namespace moesim::cli {
namespace {

// The run options the whole step shares with the MoE-layer simulation, from their flags; --zero
// is the step's own (0-3), which to_step_spec reads.
RunSpec shared_run_options(const StepArgs& a) {
  RunSpec run;
  a.options.apply(run, {"zero_stage"});
  return run;
}

StepSpec to_step_spec(const StepArgs& a, const TrainingStepArgs& s, const RunSpec& run, int gpus) {
  // The rules between options first, as the flags spell them: a module list without selective
  // recomputation is the mistake to name, whatever its modules.
  const std::string recompute = s.options.given_flag("--recompute") ? s.options.text("--recompute") : "none";
  if (s.options.given_flag("--recompute-modules") && recompute != "selective")
    throw InputError("--recompute-modules '" + s.options.text("--recompute-modules") +
                     "' needs --recompute selective (got " + recompute + ")");
  if (s.options.given_flag("--fp8-recipe") && s.options.text("--precision") != "fp8")
    throw InputError("--fp8-recipe '" + s.options.text("--fp8-recipe") +
                     "' needs --precision fp8 (bf16 GEMMs have no scaling recipe)");
  StepSpec spec;
  s.options.apply(spec);
  spec.layout.gpus = gpus;
  spec.layout.tp = run.tp_size;
  spec.layout.ep = a.options.given_key("ep_size") ? run.ep_size : 1;
  if (spec.layout.ep < 1) throw InputError("--ep must be at least 1 with --global-batch, got " + std::to_string(spec.layout.ep));
  spec.zero_stage = a.options.given_key("zero_stage") ? std::stoi(a.options.values.at("zero_stage")) : 0;
  spec.moe_chunks = run.num_chunks;
  spec.moe_strategy = run.strategy;
  spec.routing = run.routing;
  spec.seed = run.seed;
  return spec;
}

// The HTML report, and with --timing its size and the time it took (it is built from the
// simulated step alone, so the time is the report's own).
void write_html(const SimulateOutputs& outputs, const SimulatedStep& sim, const ModelSpec& model,
                const ClusterSpec& cluster, const StepSpec& spec, const std::string& version) {
  const auto start = std::chrono::steady_clock::now();
  const std::string html = step_html(sim, model, cluster, spec, version);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  write_output("--html", outputs.html_path, html);
  if (outputs.timing) {
    char line[128];
    std::snprintf(line, sizeof line, "timing: html report %zu bytes in %.1f ms\n", html.size(), ms);
    std::cerr << line;
  }
}

void refuse_layer_flags(const StepArgs& a) {
  for (const std::string& flag : layer_only_flags())
    if (a.given(flag.c_str()))
      throw InputError(flag + " belongs to the MoE-layer simulation; the whole training step (--global-batch) does "
                              "not read it");
}

}  // namespace

const std::vector<std::string>& training_step_only_flags() {
  static const std::vector<std::string> flags = [] {
    std::vector<std::string> out{"--html"};
    for (const StepOption& o : step_options()) out.push_back(o.flag);
    return out;
  }();
  return flags;
}

const std::vector<std::string>& layer_only_flags() {
  static const std::vector<std::string> flags{
      "--run",      "--tokens",   "--chunk-align", "--order",      "--no-dtd",
      "--grad-sync", "--checkpoint", "--layers", "--all-ranks",   "--loopback",
      "--slots",    "--optimizer", "--a2a",         "--no-routing-data", "--calibration"};
  return flags;
}

int run_training_step(StepArgs& a, const TrainingStepArgs& s, const SimulateOutputs& outputs,
                      const std::string& version) {
  check_outputs({{"--json", outputs.json_path},
                 {"--trace", outputs.trace_path},
                 {"--timeline", outputs.timeline_path},
                 {"--html", outputs.html_path}});
  refuse_layer_flags(a);
  if (a.model_path.empty()) throw InputError("--model is required");
  if (a.hardware_path.empty()) throw InputError("--hardware is required");
  const ModelSpec model = load_model_spec(resolve_model_arg(a.model_path, "--model"));
  const ClusterSpec cluster =
      scaled_cluster(load_hardware_spec(resolve_hardware_arg(a.hardware_path, "--hardware"), ""), a.gpus, a.nodes);
  const RunSpec run = shared_run_options(a);
  const StepSpec spec = to_step_spec(a, s, run, cluster.num_gpus());
  // Deliberately never freed: the process ends after the report, and freeing a whole step's
  // hundreds of thousands of tasks one by one took a quarter of the run (as compilers skip freeing
  // their ASTs at exit).
  const SimulatedStep& sim = *new SimulatedStep(
      // The whole step's all-to-alls are pairwise.
      simulate_training_step(model, cluster, spec, NetworkChoice{run.network, AllToAllAlgorithm::kPairwise, run.compute}));
  const bool stdout_taken = outputs.json_path == "-" || outputs.trace_path == "-" || outputs.timeline_path == "-" ||
                            outputs.html_path == "-";
  (stdout_taken ? std::cerr : std::cout) << step_summary(sim.report, model, cluster, spec);
  if (!outputs.json_path.empty())
    write_output("--json", outputs.json_path, step_report_json(sim.report, model, cluster, spec, version));
  if (!outputs.trace_path.empty())
    write_output("--trace", outputs.trace_path, perfetto_trace_json(sim.graph.graph, sim.run.trace, sim.run.memory));
  if (!outputs.timeline_path.empty()) {
    std::ostringstream timeline;
    write_timeline(timeline, sim.graph.graph, sim.run.trace, sim.run.memory);
    write_output("--timeline", outputs.timeline_path, timeline.str());
  }
  if (!outputs.html_path.empty()) write_html(outputs, sim, model, cluster, spec, version);
  if (outputs.timing)
    std::cerr << "timing: " << sim.report.tasks << " tasks on " << sim.graph.graph.simulated_ranks().size()
              << " simulated rank(s)\n";
  return 0;
}

}  // namespace moesim::cli
