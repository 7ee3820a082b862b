// The `moesim` program, and `moesim-run`, the same command line with the GPU runtime linked, which
// runs `run` and `calibrate` for it (runtime_commands.h).
//
// Exit codes: 0 success; 2 bad usage or bad input (an `error: ...` line on stderr names the file,
// line and rule), no GPU, `moesim run` on a build without the GPU runtime or without moesim-run; 1 internal error (a
// bug in moesim); 3 `moesim run --check` found results that differ from the CPU reference. Results go to stdout, diagnostics to stderr.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <iostream>
#include <string>
#include <tuple>

#include "sim/cli/calibrate_command.h"
#include "sim/cli/cli11_validators.h"
#include "sim/cli/collective_command.h"
#include "sim/cli/compare_command.h"
#include "sim/cli/cluster_flags.h"
#include "sim/cli/exit_codes.h"
#include "sim/cli/memory_limit_flag.h"
#include "sim/cli/model_command.h"
#include "sim/cli/network_flag.h"
#include "sim/cli/number_flags.h"
#include "sim/cli/options_command.h"
#include "sim/cli/plan_command.h"
#include "sim/cli/cost_models_command.h"
#include "sim/cli/presets_command.h"
#include "sim/cli/run_command.h"
#include "sim/cli/runtime_commands.h"
#include "sim/cli/runtime_options.h"
#include "sim/cli/simulate_command.h"
#include "sim/cli/step_plan_command.h"
#include "sim/cli/training_step_command.h"
#include "sim/cli/sweep_command.h"
#include "sim/cli/validate_command.h"
#include "sim/core/error.h"
#include "sim/spec/run_options.h"
#include "sim/spec/run_spec.h"
#include "sim/spec/sweep_spec.h"

namespace moesim::cli {
namespace {

constexpr const char* kVersion = MOESIM_VERSION;

// Limits of the options that have no run-file key (sim/spec/run_spec.h has those).
constexpr std::uint64_t kMaxJobs = 4096;        // threads
constexpr std::uint64_t kMaxFitNodes = 1 << 16;  // plan --fit tries every node count up to it
constexpr double kMaxStepMs = 1e9;              // a sweep file's step_target goes to 2^50 ns
constexpr std::uint64_t kMaxStepFactor = 1024;
constexpr std::uint64_t kMaxListed = 1000000;   // compare --worst

// Chunk sizes in capacity slots: multiples of it but for the last chunk (run file: chunk_alignment).
// A numeric option without a range would take "-1" or "nan" unchecked: a bug, which any run of
// the program (every CLI test) reports.
void check_every_number_has_a_range(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type == "INT" || type == "UINT" || type == "FLOAT")
      throw InternalError("option " + opt->get_name() + " of `" + app.get_name() + "` has no range (sim/cli/main.cc)");
  }
  for (const CLI::App* sub : app.get_subcommands({})) check_every_number_has_a_range(*sub);
}

// An empty value (`--json ""`, often a shell variable that is not set) would read as the option not
// given: the report silently not written, exit 0. No option of any command means anything by it.
void refuse_empty_values(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size_max() == 0) continue;  // a flag takes no value
    for (const std::string& value : opt->results())
      if (value.empty()) throw InputError(opt->get_name() + ": the value is empty");
  }
  for (const CLI::App* sub : app.get_subcommands()) refuse_empty_values(*sub);  // the parsed ones
}

// --gpus and --nodes (cluster_flags.h); returns --gpus, which excludes --nodes.
CLI::Option* add_cluster_size_flags(CLI::App* app, long long& gpus, long long& nodes) {
  CLI::Option* g = app->add_option("--gpus", gpus, "the cluster preset grown or shrunk to this many GPUs (whole nodes)")
                       ->transform(whole(1, static_cast<std::uint64_t>(kMaxClusterGpus)));
  CLI::Option* n = app->add_option("--nodes", nodes, "the cluster preset grown or shrunk to this many nodes")
                       ->transform(whole(1, kMaxClusterNodes));
  g->excludes(n);
  return g;
}

void add_step_options(CLI::App* app, StepArgs& a, std::uint64_t max_zero = 1) {
  a.given = [app](const char* flag) { return app->count(flag) > 0; };
  app->add_option("--run", a.run_path,
                  "run file (kind: run) with the model, hardware and run options; flags override it");
  app->add_option("--model", a.model_path, "model YAML, or a bundled preset's name (`moesim presets models`)");
  app->add_option("--hardware", a.hardware_path,
                  "cluster, node or GPU YAML, or a bundled preset's name (`moesim presets clusters|nodes|gpus`)");
  app->add_option("--calibration", a.calibration_path,
                  "calibration YAML measured by `moesim calibrate` on this GPU (hardware/calibration/)");
  app->add_option("--memory-limit", a.memory_limit, kMemoryLimitHelp);
  // max_zero: 3 for simulate, whose whole step (--global-batch) has ZeRO 0-3; the MoE-layer
  // simulation still refuses 2 and 3 (the run option's range).
  RunOptionFlagStyle style;
  style.widen["zero_stage"] = static_cast<std::int64_t>(max_zero);
  add_run_option_flags(app, a.options, {}, style);
  app->add_flag("--all-ranks", a.all_ranks,
                "simulate every rank instead of one representative rank");
  CLI::Option* loopback = app->add_flag(
      "--loopback", a.loopback,
      "the --ep ranks are virtual ranks sharing one GPU of the hardware, as `moesim run --loopback` runs "
      "them (shared compute, all-to-all as device copies; every rank simulated)");
  add_cluster_size_flags(app, a.gpus, a.nodes)->excludes(loopback);
}

void add_training_step_flags(CLI::App* app, TrainingStepArgs& s) { add_step_option_flags(app, s.options, {}); }

CLI::App* add_simulate(CLI::App& app, StepArgs& a, TrainingStepArgs& step, SimulateOutputs& outputs) {
  CLI::App* simulate = app.add_subcommand(
      "simulate", "simulate one training step: of MoE layers, or with --global-batch of the whole model");
  add_step_options(simulate, a, 3);
  add_training_step_flags(simulate, step);
  simulate->add_option("--json", outputs.json_path, "write the full report as JSON ('-' for stdout)");
  simulate->add_option("--trace", outputs.trace_path, "write a Chrome/Perfetto trace JSON ('-' for stdout)");
  simulate->add_option("--timeline", outputs.timeline_path,
                       "write the compact text timeline: every task's start and end in ns, each rank's peak memory "
                       "(the format of tests/golden/; '-' for stdout)");
  simulate->add_option("--html", outputs.html_path,
                       "with --global-batch: write the step's self-contained HTML report ('-' for stdout)");
  simulate->add_flag("--timing", outputs.timing, "print wall-clock time per phase on stderr");
  return simulate;
}

CLI::App* add_plan(CLI::App& app, PlanArgs& a, StepPlanArgs& s) {
  CLI::App* plan = app.add_subcommand(
      "plan", "rank pipeline degrees and memory strategies for a model on a cluster, or with --global-batch the "
              "layouts of a whole training step (docs/planning.md)");
  plan->add_option("--global-batch", s.global_batch, "sequences per step: plan the whole step's layout")
      ->transform(whole(1, kMaxTokensPerGpu));
  plan->add_option("--top", s.top, "layouts shown; the best 2K by the estimate are simulated")->transform(whole(1, 1000));
  plan->add_option("--target-tokens-per-day", s.target_tokens_per_day, "the fewest nodes reaching this token rate")
      ->transform(real(0, 1e30, true));
  add_step_option_flags(plan, s.options, {"--seq", "--attention", "--host-launch-us", "--dispatcher"});
  plan->add_option("--schedules", s.schedules,
                   "with --global-batch: pipeline schedules to try, a list of 1f1b, interleaved, gpipe, zb-h1, dualpipe, "
                   "dualpipev (default 1f1b, interleaved with vpp > 1; zb-h1, dualpipe and dualpipev are simulated in full)");
  // Not the step option: the plan tries layouts with and without it.
  plan->add_flag("--overlap-moe-expert-parallel-comm", s.overlap_moe_ep_comm,
                 "with --global-batch: also try each MoE layout Megatron-Core's combined 1F1B runs on (--pp 1 or "
                 "--vpp > 1, --ep > 1, no full recomputation, ZeRO below 3) with it (docs/planning.md)");
  plan->add_flag("--use-tp-pp-dp-mapping", s.tp_pp_dp_mapping,
                 "with --global-batch: also try each layout with --pp > 1 in Megatron-LM's rank order tp-cp-pp-dp "
                 "(with MoE layers where --etp x --ep = --tp x --cp; docs/planning.md)");
  for (auto [flag, text, what] : {std::tuple{"--pp", &s.pp, "pipeline stages"}, {"--vpp", &s.vpp, "virtual stages"},
                                   {"--cp", &s.cp, "context-parallel degrees"},
                                   {"--etp", &s.etp, "experts' tensor-parallel sizes"},
                                   {"--micro-batch", &s.micro_batch, "micro-batch sizes"},
                                   {"--recompute", &s.recompute, "recomputations (none, selective, full)"}})
    plan->add_option(flag, *text, std::string("with --global-batch: the ") + what +
                                      " to try, a list or range (default every legal one, docs/planning.md)");
  plan->add_option("--recompute-modules", s.recompute_modules,
                   "with --global-batch and selective among --recompute: the modules it re-runs, a list of core_attn, "
                   "layernorm, moe_act, mla_up_proj, mlp, moe, shared_experts (default core_attn); several sets "
                   "separated by / are tried apart, e.g. mla_up_proj,mlp/mla_up_proj,moe");
  plan->add_option("--zero-stages", s.zero_stages,
                   "with --global-batch: the ZeRO stages to try, a list or range of 0-3 (default 0,1; 2 and 3 shard "
                   "the gradients, and 3 the weights, for layouts that would not fit)");
  plan->add_option("--model", a.model_path, "model YAML or bundled preset name (`moesim presets models`)")->required();
  plan->add_option("--hardware", a.hardware_path, "cluster, node or GPU YAML or bundled preset name")->required();
  plan->add_option("--calibration", a.calibration_path, "calibration YAML measured by `moesim calibrate`");
  add_cluster_size_flags(plan, a.gpus, a.nodes);
  plan->add_option("--tokens", a.tokens, "tokens per GPU: one count or a list (2048,4096)");
  plan->add_option("--chunks,-n", a.chunks, "pipeline degrees to try: list or ranges (default 1-16, capped by capacity; with "
                   "--global-batch the MoE layers' sub-stage chunks, default 1,2,4)");
  plan->add_option("--strategies", a.strategies,
                   "memory strategies: all (with --checkpoint: none) or a list of none,s1,s2,s3,s4")
      ->capture_default_str();
  plan->add_option("--objective", a.objective, "what best means: time (step) | forward (the MoE forward pass alone, what the PipeMoE model predicts) | memory | balanced")->capture_default_str();
  plan->add_option("--method", a.method, "selection method: simulate|pipemoe|mpipemoe-online|mpmoe-model|all")
      ->capture_default_str();
  plan->add_option("--ep", a.ep,
                   "expert-parallel group size (default 0 = every GPU / --tp); with --global-batch the ep values to "
                   "try, a list (default every divisor of the experts)");
  plan->add_option("--tp", a.tp,
                   "tensor-parallel degree (DeepSpeed-TED; default 1): the simulate and mpipemoe-online methods only; "
                   "with --global-batch the tp values to try, a list (default every divisor of a node's GPUs that divides "
                   "the cluster's)");
  RunOptionFlagStyle style;
  style.notes["routing"] =
      "; plan: the simulate method (the model-based methods assume balanced routing); with --global-batch uniform "
      "or zipf:<s>";
  add_run_option_flags(plan, a.options, plan_option_keys(), style);
  plan->add_option("--json", a.json_path, "write the plan as JSON ('-' for stdout)");
  plan->add_option("--memory-limit", a.memory_limit, kMemoryLimitHelp);
  plan->add_option("--jobs,-j", a.jobs, "simulations in parallel (0 = every core)")
      ->transform(whole(0, kMaxJobs))->capture_default_str();
  plan->add_flag("--fit", a.fit, "find the smallest node count of the hardware preset that fits");
  plan->add_option("--max-nodes", a.max_nodes, "--fit, --target-tokens-per-day: largest node count tried")
      ->transform(whole(1, kMaxFitNodes))->capture_default_str();
  plan->add_option("--max-step-ms", a.max_step_ms, "--fit: the step must take at most this long (ms)")
      ->transform(real(0, kMaxStepMs));
  return plan;
}

CLI::App* add_sweep(CLI::App& app, SweepArgs& a) {
  CLI::App* sweep = app.add_subcommand(
      "sweep", "simulate a grid of configurations on all cores; CSV, JSON and HTML reports (docs/planning.md)");
  sweep->add_option("--grid", a.grid_path, "sweep YAML (kind: sweep); the flags below override its axes");
  sweep->add_option("--model", a.models, "model preset YAML(s), comma-separated");
  sweep->add_option("--hardware", a.hardware, "hardware preset YAML(s), comma-separated");
  sweep->add_option("--gpus", a.gpus, "GPU counts (multiples of the preset's GPUs per node)");
  sweep->add_option("--tokens", a.tokens, "tokens per GPU: list or ranges");
  sweep->add_option("--global-tokens", a.global_tokens,
                    "instead of --tokens: tokens per step of the whole cluster, list or ranges; each configuration "
                    "gets global / (GPUs / tp) per GPU");
  sweep->add_option("--tp", a.tp,
                    "tensor-parallel degrees, list or ranges (default 1); the expert-parallel group spans GPUs / tp");
  sweep->add_option("--chunks,-n", a.chunks, "pipeline degrees (default without --grid: 1,2,4,8)");
  sweep->add_option("--strategies", a.strategies, "memory strategies: all or none,s1,s2,s3,s4 (default none)");
  sweep->add_option("--routing", a.routing, "routing values, comma-separated: uniform, zipf:<s>, matrix:<csv file>");
  // Given to every configuration; without a flag the grid file's value, else the run default.
  RunOptionFlagStyle style;
  style.show_defaults = false;
  add_run_option_flags(sweep, a.fixed, sweep_fixed_keys(), style);
  sweep->add_option("--step-target-ms", a.step_target_ms, "capacity view: the step must take at most this (ms)")
      ->transform(real(0, kMaxStepMs));
  sweep->add_option("--csv", a.csv_path, "write the CSV ('-' for stdout; the default when no output is named)");
  sweep->add_option("--json", a.json_path, "write the JSON ('-' for stdout)");
  sweep->add_option("--html", a.html_path, "write the self-contained HTML report");
  sweep->add_option("--memory-limit", a.memory_limit, kMemoryLimitHelp);
  sweep->add_option("--jobs,-j", a.jobs, "threads (0 = every core)")
      ->transform(whole(0, kMaxJobs))->capture_default_str();
  sweep->add_flag("--timing", a.timing, "print the wall-clock time of the sweep on stderr");
  return sweep;
}

CLI::App* add_collective(CLI::App& app, CollectiveArgs& a) {
  CLI::App* collective = app.add_subcommand(
      "collective", "simulate one collective over a size range, printed as nccl-tests prints it");
  collective->add_option("--hardware", a.hardware_path, "cluster or node YAML")->required();
  collective->add_option("--op", a.op, "all-to-all|all-reduce|all-gather|reduce-scatter")->capture_default_str();
  collective->add_option("--ranks", a.ranks, "ranks (0 = every GPU of the cluster)")
      ->transform(whole(0, kMaxGroupSize))->capture_default_str();
  collective->add_option("--min-bytes,-b", a.min_bytes, "smallest size (K, M, G)")->capture_default_str();
  collective->add_option("--max-bytes,-e", a.max_bytes, "largest size (K, M, G)")->capture_default_str();
  collective->add_option("--step-factor,-f", a.step_factor, "size multiplication factor")
      ->transform(whole(2, kMaxStepFactor))->capture_default_str();
  collective->add_option("--network", a.network, run_option("network").help)->capture_default_str();
  collective->add_option("--a2a", a.a2a, "all-to-all algorithm: pairwise|2dh")->capture_default_str();
  collective->add_option("--calibration", a.calibration_path,
                         "calibration YAML, e.g. the network fitted by `moesim calibrate --alltoall-log`");
  CLI::Option* coll_against = collective->add_option(
      "--against", a.against_log,
      "an nccl-tests log (alltoall_perf, all_reduce_perf, all_gather_perf, reduce_scatter_perf): simulate its sizes, "
      "on the GPUs its ranks ran on, and print measured and simulated times side by side");
  for (const char* range : {"--min-bytes", "--max-bytes", "--step-factor"}) coll_against->excludes(collective->get_option(range));
  return collective;
}

CLI::App* add_compare(CLI::App& app, CompareArgs& a) {
  CLI::App* compare = app.add_subcommand(
      "compare", "put two step reports side by side per step, stage and task (measured vs simulated)");
  compare->add_option("reference", a.reference_path, "reference report, e.g. `moesim run --json`")
      ->required();
  compare->add_option("predicted", a.predicted_path,
                      "predicted report, e.g. `moesim simulate --all-ranks --json` of the same configuration")
      ->required();
  compare->add_option("--csv", a.csv_path, "write one row per task ('-' for stdout)");
  compare->add_option("--json", a.json_path, "write the comparison as JSON ('-' for stdout)");
  compare->add_option("--worst", a.worst, "tasks with the largest differences listed")
      ->transform(whole(0, kMaxListed))->capture_default_str();
  return compare;
}

// `graph export` and `graph check`.
struct GraphArgs {
  StepArgs export_args;
  std::string export_path = "-";
  std::string check_path;
  CLI::App* export_cmd = nullptr;
  CLI::App* check_cmd = nullptr;
};

void add_graph(CLI::App& app, GraphArgs& g) {
  CLI::App* graph_cmd = app.add_subcommand("graph", "task graph tools");
  graph_cmd->require_subcommand(1);
  g.export_cmd = graph_cmd->add_subcommand("export", "write the task graph as JSON");
  add_step_options(g.export_cmd, g.export_args);
  g.export_cmd->add_option("--output,-o", g.export_path, "output file ('-' for stdout)")->capture_default_str();
  g.check_cmd = graph_cmd->add_subcommand("check", "validate a task graph JSON file");
  g.check_cmd->add_option("file", g.check_path, "graph JSON written by `moesim graph export`")->required();
}

// `moesim validate published`, `steps`, `layers`, `calibration` and `interference`.
struct ValidateCommands {
  ValidatePublishedArgs published_args;
  ValidateStepsArgs steps_args;
  ValidateLayersArgs layers_args;
  ValidateCalibrationArgs calibration_args;
  ValidateInterferenceArgs interference_args;
  CLI::App* published = nullptr;
  CLI::App* steps = nullptr;
  CLI::App* layers = nullptr;
  CLI::App* calibration = nullptr;
  CLI::App* interference = nullptr;
};

void add_validate(CLI::App& app, ValidateCommands& v) {
  CLI::App* validate_cmd = app.add_subcommand("validate", "hold moesim against measurements");
  validate_cmd->require_subcommand(1);
  v.published = validate_cmd->add_subcommand(
      "published", "replay the published measurements of validate/data/ and print each error (docs/validation.md)");
  v.published->add_option("--data", v.published_args.data_dir, "folder of datasets (default validate/data)");
  v.published->add_option("--csv", v.published_args.csv_path, "write one row per point ('-' for stdout)");
  v.published->add_option("--network", v.published_args.network, run_option("network").help)->capture_default_str();
  v.steps = validate_cmd->add_subcommand(
      "steps", "simulate the published whole training steps of validate/data/ and print each error (docs/validation.md)");
  v.steps->add_option("--data", v.steps_args.data_dir, "folder of datasets (default validate/data)");
  v.steps->add_option("--csv", v.steps_args.csv_path, "write one row per dataset row ('-' for stdout)");
  v.steps->add_option("--network", v.steps_args.network, run_option("network").help)->capture_default_str();
  v.steps->add_option("--only", v.steps_args.only, "DATASET, DATASET:LINE or DATASET:MODEL, comma-separated (default: every row)");
  add_step_option_flags(v.steps, v.steps_args.step, {"--host-launch-us"});
  v.layers = validate_cmd->add_subcommand(
      "layers", "simulate the published per-layer times of validate/data/ and print each error (docs/validation.md)");
  v.layers->add_option("--data", v.layers_args.data_dir, "folder of datasets (default validate/data)");
  v.layers->add_option("--network", v.layers_args.network, run_option("network").help)->capture_default_str();
  v.calibration = validate_cmd->add_subcommand(
      "calibration", "a calibration file's measured GEMM times against the datasheet model of a node of that GPU "
                     "(docs/validation.md)");
  v.calibration->add_option("--calibration", v.calibration_args.calibration_path, "calibration YAML (`moesim calibrate`)")
      ->required();
  v.calibration->add_option("--hardware", v.calibration_args.hardware_path,
                            "node, cluster or GPU YAML or bundled preset name, without a calibration of its own")
      ->required();
  v.calibration->add_option("--csv", v.calibration_args.csv_path, "write one row per point ('-' for stdout)");
  v.interference = validate_cmd->add_subcommand(
      "interference", "GEMMs measured beside a communication kernel (moesim_sm_share_probe) against a node's "
                      "GEMM-size interference table and its single cell (docs/validation.md)");
  v.interference->add_option("--hardware", v.interference_args.hardware_path,
                             "node or cluster YAML or bundled preset name with interference.gemm_with_communication")
      ->required();
  v.interference->add_option("--probe", v.interference_args.probe_paths,
                             "output of moesim_sm_share_probe --shapes, --waves or --batched (repeatable)")
      ->required();
  v.interference->add_option("--csv", v.interference_args.csv_path, "write one row per shape ('-' for stdout)");
}

CLI::App* add_presets(CLI::App& app, PresetsArgs& a) {
  CLI::App* presets = app.add_subcommand(
      "presets", "list the bundled presets (name, size, source); --model and --hardware take the names");
  presets->add_option("kind", a.kind, "models | clusters | nodes | gpus (default: all)");
  return presets;
}

CLI::App* add_cost_models(CLI::App& app, CostModelsArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "cost-models", "list the network and compute models (name, kind, needs); --network and --compute take the names");
  cmd->add_option("kind", a.kind, "network | compute (default: both)");
  return cmd;
}

CLI::App* add_options_command(CLI::App& app, OptionsArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "options", "list the run options (run-file key, flag, type, default, values, rule) and the whole step's own options");
  cmd->add_option("kind", a.kind, "run | step (default: both)");
  cmd->add_flag("--markdown", a.markdown,
                "print the tables of docs/config-reference.md's run-file section and docs/training-step.md's flags");
  return cmd;
}

// CLI11 would only say "a subcommand is required"; name the unknown command instead.
void refuse_unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc <= 1 || argv[1][0] == '-') return;
  const std::string first = argv[1];
  bool known = false;
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known = known || sub->get_name() == first;
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  if (!known) throw InputError("unknown command '" + first + "'; commands: " + names);
}

// `moesim model`: the network, its parameters and FLOPs, and its model states per GPU of a layout.
CLI::App* add_model_command(CLI::App& app, ModelArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "model", "describe a model file's network, count its parameters against the published counts, its training "
               "FLOPs and its model states per GPU under a layout");
  cmd->add_option("--model", a.model_path, "model YAML or bundled preset name (`moesim presets models`)")->required();
  cmd->add_option("--json", a.json_path, "write the counts as JSON ('-' for stdout)");
  const auto degree = [&](const char* flag, int& value, const char* what) {
    cmd->add_option(flag, value, what)->transform(whole(1, kMaxGroupSize))->capture_default_str();
  };
  degree("--tp", a.layout.tp, "tensor-parallel degree (attention, MLPs, each expert's matrices, embeddings)");
  degree("--pp", a.layout.pp, "pipeline stages (must divide the layers)");
  degree("--ep", a.layout.ep, "expert-parallel degree (must divide the experts)");
  degree("--dp", a.layout.dp, "data-parallel replicas of the tp x pp x ep GPUs");
  cmd->add_option("--zero", a.layout.zero_stage,
                  "ZeRO stage: 0 none, 1 optimizer states, 2 and gradients, 3 and weights sharded over the "
                  "data-parallel replicas")
      ->transform(whole(0, 3))
      ->capture_default_str();
  return cmd;
}

// simulate and plan run one layer's question, or with --global-batch the whole step's; the flags
// of the other mode are refused.
int dispatch_simulate(const CLI::App& simulate, StepArgs& sim_args, const TrainingStepArgs& step_args,
                      const SimulateOutputs& sim_outputs) {
  if (simulate.count("--global-batch") > 0) return run_training_step(sim_args, step_args, sim_outputs, kVersion);
  for (const std::string& flag : training_step_only_flags())
    if (simulate.count(flag) > 0)
      throw InputError(flag + " belongs to the whole training step: give --global-batch (docs/training-step.md)");
  return run_simulate(sim_args, sim_outputs, kVersion);
}

int dispatch_plan(const CLI::App& plan, PlanArgs& plan_args, const StepPlanArgs& step_plan_args) {
  auto given = [&plan](const std::string& flag) { return plan.count(flag) > 0; };
  if (given("--global-batch")) return run_step_plan(plan_args, step_plan_args, given, kVersion);
  for (const std::string& flag : step_plan_only_flags())
    if (given(flag)) throw InputError(flag + " belongs to the whole step's layout plan: give --global-batch");
  return run_plan(plan_args, kVersion);
}

int main_impl(int argc, char** argv) {
  CLI::App app{"moesim: predict and measure the time and memory of Mixture-of-Experts training steps"};
  app.require_subcommand(1);
  bool show_version = false;
  app.add_flag("--version", show_version, "print the version and exit");
  StepArgs sim_args;
  SimulateOutputs sim_outputs;
  TrainingStepArgs step_args;
  CLI::App* simulate = add_simulate(app, sim_args, step_args, sim_outputs);
  GraphArgs graph;
  add_graph(app, graph);
  PlanArgs plan_args;
  StepPlanArgs step_plan_args;
  CLI::App* plan = add_plan(app, plan_args, step_plan_args);
  SweepArgs sweep_args;
  CLI::App* sweep = add_sweep(app, sweep_args);
  CollectiveArgs coll;
  CLI::App* collective = add_collective(app, coll);
  RunArgs run_args;
  CLI::App* run_cmd = add_run(app, run_args);
  CalibrateArgs cal_args;
  CLI::App* calibrate = add_calibrate(app, cal_args);
  CompareArgs compare_args;
  CLI::App* compare = add_compare(app, compare_args);
  ValidateCommands validate;
  add_validate(app, validate);
  PresetsArgs presets_args;
  CLI::App* presets = add_presets(app, presets_args);
  ModelArgs model_args;
  CLI::App* model_cmd = add_model_command(app, model_args);
  CostModelsArgs cost_models_args;
  CLI::App* cost_models_cmd = add_cost_models(app, cost_models_args);
  OptionsArgs options_args;
  CLI::App* options_cmd = add_options_command(app, options_args);
  check_every_number_has_a_range(app);
  // --version must work without a subcommand.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--version") {
      std::cout << "moesim " << kVersion << "\n";
      return 0;
    }
  }
  refuse_unknown_command(app, argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "error: " << e.what() << "\nRun with --help for usage.\n";
    return 2;
  }
  refuse_empty_values(app);

  if (simulate->parsed()) return dispatch_simulate(*simulate, sim_args, step_args, sim_outputs);
  if (graph.export_cmd->parsed()) return run_graph_export(graph.export_args, graph.export_path);
  if (graph.check_cmd->parsed()) return run_graph_check(graph.check_path);
  if (plan->parsed()) return dispatch_plan(*plan, plan_args, step_plan_args);
  if (sweep->parsed()) return run_sweep_command(sweep_args, kVersion);
  if (collective->parsed()) {
    coll.op_given = collective->count("--op") > 0;
    coll.against_given = collective->count("--against") > 0;
    return run_collective(coll, std::cout);
  }
  if (run_cmd->parsed()) return run_runtime_command(argc, argv, &run_args, nullptr, kVersion);
  if (compare->parsed()) return run_compare(compare_args);
  if (validate.published->parsed()) return run_validate_published(validate.published_args);
  if (validate.steps->parsed()) return run_validate_steps(validate.steps_args);
  if (validate.layers->parsed()) return run_validate_layers(validate.layers_args);
  if (validate.calibration->parsed()) return run_validate_calibration(validate.calibration_args);
  if (validate.interference->parsed()) return run_validate_interference(validate.interference_args);
  if (presets->parsed()) return run_presets(presets_args, std::cout);
  if (model_cmd->parsed()) return run_model(model_args, std::cout);
  if (cost_models_cmd->parsed()) return run_cost_models(cost_models_args, std::cout);
  if (options_cmd->parsed()) return run_options_command(options_args, std::cout);
  if (calibrate->parsed()) {
    cal_args.out_given = calibrate->count("--out") > 0;
    for (int i = 0; i < argc; ++i) cal_args.command_line += (i ? " " : "") + std::string(i ? argv[i] : "moesim");
    return run_runtime_command(argc, argv, nullptr, &cal_args, kVersion);
  }
  return 2;
}

}  // namespace
}  // namespace moesim::cli

int main(int argc, char** argv) { return moesim::cli::run_with_exit_codes(moesim::cli::main_impl, argc, argv); }
