#include "sim/cli/training_step_command.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "sim/cli/cluster_flags.h"
#include "sim/cli/dispatcher_flag.h"
#include "sim/cli/host_launch_flag.h"
#include "sim/cli/list_args.h"
#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/report/report.h"
#include "sim/report/timeline.h"
#include "sim/spec/loader.h"
#include "sim/spec/presets.h"
#include "sim/spec/run_spec.h"
#include "sim/spec/yaml_reader.h"
#include "sim/step/step_html.h"
#include "sim/step/step_simulation.h"

namespace moesim::cli {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

template <typename E>
E parse_flag(const std::string& flag, const std::string& value, std::optional<E> parsed,
             const std::vector<std::string>& names) {
  if (!parsed) throw InputError(flag + " '" + value + "' is not one of: " + join(names));
  return *parsed;
}

// "4,8,8": the layers of each model part; InputError naming --part-layers for anything else.
std::vector<int> parse_part_layers(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    int value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < 0 || value > kMaxMoeLayers)
      throw InputError("--part-layers '" + text + "': '" + item + "' is not a layer count in [0, " +
                       std::to_string(kMaxMoeLayers) + "]; give a comma-separated list such as 4,8,8,...");
    out.push_back(value);
    start = comma + 1;
  }
  return out;
}

StepSpec to_step_spec(const StepArgs& a, const TrainingStepArgs& s, int gpus) {
  // The run options the whole step shares with the MoE-layer simulation, from their flags; --zero
  // is the step's own (0-3), read below.
  RunSpec run;
  a.options.apply(run, {"zero_stage"});
  StepSpec spec;
  spec.layout.gpus = gpus;
  spec.layout.tp = run.tp_size;
  spec.layout.pp = s.pp;
  spec.layout.vpp = s.vpp;
  spec.layout.ep = a.options.given_key("ep_size") ? run.ep_size : 1;
  spec.layout.cp = s.cp;
  spec.layout.etp = s.etp;
  if (spec.layout.ep < 1) throw InputError("--ep must be at least 1 with --global-batch, got " + std::to_string(spec.layout.ep));
  spec.global_batch = s.global_batch;
  spec.micro_batch = s.micro_batch;
  spec.seq = s.seq;
  if (!s.schedule.empty())
    spec.schedule = parse_flag("--schedule", s.schedule, parse_pipeline_schedule(s.schedule), pipeline_schedule_names());
  spec.part_layers = parse_part_layers(s.part_layers);
  spec.recompute = parse_flag("--recompute", s.recompute, parse_recompute(s.recompute), recompute_names());
  if (!s.recompute_modules.empty()) {
    if (spec.recompute != Recompute::kSelective)
      throw InputError("--recompute-modules '" + s.recompute_modules + "' needs --recompute selective (got " +
                       s.recompute + ")");
    spec.recompute_modules = parse_recompute_modules_flag(s.recompute_modules);
  }
  spec.sequence_parallel = s.sequence_parallel;
  spec.attention = parse_flag("--attention", s.attention, parse_attention_kernel(s.attention), attention_kernel_names());
  if (s.precision != "bf16" && s.precision != "fp8")
    throw InputError("--precision '" + s.precision + "' is not one of: bf16, fp8");
  spec.gemm_precision = s.precision == "fp8" ? DType::kFp8 : DType::kBf16;
  if (!s.fp8_recipe.empty()) {
    if (spec.gemm_precision != DType::kFp8)
      throw InputError("--fp8-recipe '" + s.fp8_recipe + "' needs --precision fp8 (bf16 GEMMs have no scaling recipe)");
    spec.fp8_recipe = parse_flag("--fp8-recipe", s.fp8_recipe, parse_fp8_recipe(s.fp8_recipe), fp8_recipe_names());
  }
  spec.zero_stage = a.options.given_key("zero_stage") ? std::stoi(a.options.values.at("zero_stage")) : 0;
  spec.overlap_grad_reduce = !s.no_overlap_grad_reduce;
  spec.overlap_moe_ep_comm = s.overlap_moe_ep_comm;
  spec.moe_chunks = run.num_chunks;
  spec.moe_strategy = run.strategy;
  spec.routing = run.routing;
  spec.seed = run.seed;
  spec.host_launch_ns = host_launch_ns(s.host_launch_us);
  spec.dispatcher = parse_dispatcher_flag(s.dispatcher);
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

// The cost models the --network and --compute flags name (the whole step's all-to-alls are pairwise).
NetworkChoice network_choice(const StepArgs& a) {
  RunSpec run;
  a.options.apply(run, {"zero_stage"});
  return NetworkChoice{run.network, AllToAllAlgorithm::kPairwise, run.compute};
}

void refuse_layer_flags(const StepArgs& a) {
  for (const std::string& flag : layer_only_flags())
    if (a.given(flag.c_str()))
      throw InputError(flag + " belongs to the MoE-layer simulation; the whole training step (--global-batch) does "
                              "not read it");
}

}  // namespace

const std::vector<std::string>& training_step_only_flags() {
  static const std::vector<std::string> flags{"--micro-batch", "--seq",       "--pp",        "--vpp",
                                              "--cp",          "--etp",       "--schedule",  "--recompute", "--recompute-modules",
                                              "--sequence-parallel",
                                              "--precision",   "--fp8-recipe", "--attention", "--no-overlap-grad-reduce",
                                              "--part-layers", "--html", "--host-launch-us", "--dispatcher"};
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
  const StepSpec spec = to_step_spec(a, s, cluster.num_gpus());
  // Deliberately never freed: the process ends after the report, and freeing a whole step's
  // hundreds of thousands of tasks one by one took a quarter of the run (as compilers skip freeing
  // their ASTs at exit).
  const SimulatedStep& sim = *new SimulatedStep(
      simulate_training_step(model, cluster, spec, network_choice(a)));
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
