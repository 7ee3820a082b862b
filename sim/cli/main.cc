// The `moesim` program.
//
// Exit codes: 0 success; 2 bad usage or bad input (an `error: ...` line on stderr names the file,
// line and rule), no GPU, or `moesim run` on a build without the GPU runtime; 1 internal error (a
// bug in moesim); 3 `moesim run --check` found results that differ from the CPU reference. Results go to stdout, diagnostics to stderr.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/calibrate_command.h"
#include "sim/cli/collective_command.h"
#include "sim/cli/compare_command.h"
#include "sim/cli/layout_flags.h"
#include "sim/cli/output_file.h"
#include "sim/cli/plan_command.h"
#include "sim/cli/run_command.h"
#include "sim/cli/sweep_command.h"
#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/graph/graph_algorithms.h"
#include "sim/graph/graph_json.h"
#include "sim/memory/model_memory.h"
#include "sim/report/report.h"
#include "sim/report/timeline.h"
#include "sim/spec/loader.h"

namespace moesim::cli {
namespace {

constexpr const char* kVersion = MOESIM_VERSION;

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

struct StepArgs {
  CLI::App* app = nullptr;  // to tell flags given on the command line from defaults
  std::string run_path;
  std::string model_path;
  std::string hardware_path;
  std::string calibration_path;
  long long tokens = 0;
  int chunks = 1;
  std::string order = "mpipemoe";
  int ep_size = 0;
  int tp_size = 1;
  LayoutFlags layout;
  int layers = 1;
  bool all_ranks = false;
  bool loopback = false;
  unsigned long long seed = 1;
  std::string strategy = "none";
  int slots = 2;
  std::string optimizer = "adam";
  bool no_routing_data = false;
  std::string network = "auto";
  std::string a2a = "pairwise";
  std::string routing = "uniform";
  std::string routing_base;  // the run file's folder, for a matrix path given there
};

void add_layout_flags(CLI::App* app, LayoutFlags& f) {
  app->add_flag("--no-dtd", f.no_dtd,
                "with --tp > 1: send every token through the all-to-alls on every tensor-parallel rank instead of "
                "TED's duplicate token dropping (1/tp each, then an all-gather)");
  app->add_flag("--grad-sync", f.grad_sync,
                "simulate the data-parallel gradient all-reduces (experts over their data-parallel replicas, the "
                "gate and shared experts over the non-expert group) on stream comm.grad");
  app->add_option("--zero", f.zero_stage,
                  "ZeRO stage of the optimizer states: 0 (whole on every rank; the default) or 1 (sharded over "
                  "the data-parallel group)");
  app->add_option("--checkpoint", f.checkpoint,
                  "activation checkpointing of each MoE layer: none (the default) | full (re-run its forward before "
                  "its backward) | cac (TED's communication-aware checkpointing: the re-run reuses the all-to-alls' "
                  "stashed outputs); needs strategy none");
}

void add_step_options(CLI::App* app, StepArgs& a) {
  a.app = app;
  app->add_option("--run", a.run_path,
                  "run file (kind: run) with the model, hardware and run options; flags override it");
  app->add_option("--model", a.model_path, "model preset YAML (models/*.yaml)");
  app->add_option("--hardware", a.hardware_path, "cluster, node or GPU YAML (hardware/**.yaml)");
  app->add_option("--calibration", a.calibration_path,
                  "calibration YAML measured by `moesim calibrate` on this GPU (hardware/calibration/)");
  app->add_option("--tokens", a.tokens, "tokens per GPU per layer pass (B)");
  app->add_option("--chunks,-n", a.chunks, "pipeline chunks per layer (n)")->capture_default_str();
  app->add_option("--order", a.order, "ordering policy: sequential|mpipemoe|fastermoe|tutel")
      ->capture_default_str();
  app->add_option("--ep", a.ep_size, "expert-parallel group size (0 = every GPU of the cluster / --tp)")
      ->capture_default_str();
  app->add_option("--tp", a.tp_size,
                  "tensor-parallel degree of the experts and non-expert blocks (DeepSpeed-TED); the GPUs are "
                  "tp x ep x data-parallel replicas")
      ->capture_default_str();
  add_layout_flags(app, a.layout);
  app->add_option("--layers", a.layers, "MoE layers simulated back to back")->capture_default_str();
  app->add_flag("--all-ranks", a.all_ranks,
                "simulate every rank instead of one representative rank");
  app->add_flag("--loopback", a.loopback,
                "the --ep ranks are virtual ranks sharing one GPU of the hardware, as `moesim run --loopback` runs "
                "them (shared compute, all-to-all as device copies; every rank simulated)");
  app->add_option("--seed", a.seed, "random seed (recorded in the report)")->capture_default_str();
  app->add_option("--strategy", a.strategy, "memory-reuse strategy: none|s1|s2|s3|s4 (MPipeMoE)")
      ->capture_default_str();
  app->add_option("--slots", a.slots, "buffer slots per reused tensor with s1-s4: 1 or 2")
      ->capture_default_str();
  app->add_option("--optimizer", a.optimizer, "optimizer for model-state memory: adam|momentum|sgd")
      ->capture_default_str();
  app->add_option("--network", a.network,
                  "collective model: auto|alpha-beta|flow (auto: flow when the hardware has a topology)")
      ->capture_default_str();
  app->add_option("--a2a", a.a2a, "all-to-all algorithm of dispatch/combine (flow model): pairwise|2dh")
      ->capture_default_str();
  app->add_flag("--no-routing-data", a.no_routing_data,
                "do not count gate scores and indices kept for backward (the papers' accounting)");
  app->add_option("--routing", a.routing,
                  "token routing: uniform (balanced, padded to capacity) | zipf:<s> | matrix:<csv file>; "
                  "other than uniform, every rank is simulated with its own rows")
      ->capture_default_str();
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

bool given(const StepArgs& a, const char* flag) { return a.app->count(flag) > 0; }

// Merges the run file (if any) with the flags; flags given on the command line win.
void resolve_step_args(StepArgs& a) {
  RunFile file;
  if (!a.run_path.empty()) {
    file = load_run_spec(a.run_path);
    if (!given(a, "--model") && file.model_path) a.model_path = *file.model_path;
    if (!given(a, "--hardware") && file.hardware_path) a.hardware_path = *file.hardware_path;
    if (!given(a, "--tokens")) a.tokens = file.run.tokens_per_gpu;
    if (!given(a, "--chunks")) a.chunks = file.run.num_chunks;
    if (!given(a, "--order")) a.order = std::string(to_string(file.run.order));
    if (!given(a, "--ep")) a.ep_size = file.run.ep_size;
    if (!given(a, "--tp")) a.tp_size = file.run.tp_size;
    if (!given(a, "--no-dtd")) a.layout.no_dtd = !file.run.drop_duplicate_tokens;
    if (!given(a, "--grad-sync")) a.layout.grad_sync = file.run.grad_sync;
    if (!given(a, "--zero")) a.layout.zero_stage = file.run.zero_stage;
    if (!given(a, "--checkpoint")) a.layout.checkpoint = std::string(to_string(file.run.checkpoint));
    if (!given(a, "--layers")) a.layers = file.run.num_moe_layers;
    if (!given(a, "--seed")) a.seed = file.run.seed;
    if (!given(a, "--strategy")) a.strategy = std::string(to_string(file.run.strategy));
    if (!given(a, "--slots")) a.slots = file.run.slots;
    if (!given(a, "--optimizer")) a.optimizer = std::string(to_string(file.run.optimizer));
    if (!given(a, "--no-routing-data")) a.no_routing_data = !file.run.count_routing_data;
    if (!given(a, "--network")) a.network = std::string(to_string(file.run.network));
    if (!given(a, "--a2a")) a.a2a = std::string(to_string(file.run.all_to_all));
    if (!given(a, "--routing")) a.routing = file.run.routing.to_string();  // paths already resolved
  }
  if (a.model_path.empty()) throw InputError("--model is required (or model: in a --run file)");
  if (a.hardware_path.empty()) throw InputError("--hardware is required (or hardware: in a --run file)");
  if (a.run_path.empty() && !given(a, "--tokens"))
    throw InputError("--tokens is required (or tokens_per_gpu: in a --run file)");
}

RunSpec to_run_spec(const StepArgs& a) {
  if (a.tokens <= 0) throw InputError("--tokens must be a positive token count, got " + std::to_string(a.tokens));
  if (a.chunks < 1) throw InputError("--chunks must be at least 1, got " + std::to_string(a.chunks));
  if (a.layers < 1) throw InputError("--layers must be at least 1, got " + std::to_string(a.layers));
  if (a.ep_size < 0) throw InputError("--ep must be 0 (all GPUs) or positive, got " + std::to_string(a.ep_size));
  check_layout_flags(a.tp_size, a.tp_size, a.layout.no_dtd && given(a, "--no-dtd"), a.layout.zero_stage);
  RunSpec run;
  run.tokens_per_gpu = a.tokens;
  run.num_chunks = a.chunks;
  run.ep_size = a.ep_size;
  run.tp_size = a.tp_size;
  run.drop_duplicate_tokens = !a.layout.no_dtd;
  run.grad_sync = a.layout.grad_sync;
  run.zero_stage = a.layout.zero_stage;
  run.checkpoint = parse_checkpoint_flag(a.layout.checkpoint);
  run.num_moe_layers = a.layers;
  run.seed = a.seed;
  const auto order = parse_order_policy(a.order);
  if (!order)
    throw InputError("--order '" + a.order + "' is not an ordering policy; valid: " + join(order_policy_names()));
  run.order = *order;
  const auto strategy = parse_memory_strategy(a.strategy);
  if (!strategy)
    throw InputError("--strategy '" + a.strategy + "' is not a memory strategy; valid: " +
                     join(memory_strategy_names()));
  run.strategy = *strategy;
  if (a.slots != 1 && a.slots != 2)
    throw InputError("--slots must be 1 (single buffering) or 2 (double buffering), got " + std::to_string(a.slots));
  run.slots = a.slots;
  const auto optimizer = parse_optimizer(a.optimizer);
  if (!optimizer)
    throw InputError("--optimizer '" + a.optimizer + "' is not an optimizer; valid: " + join(optimizer_names()));
  run.optimizer = *optimizer;
  run.count_routing_data = !a.no_routing_data;
  const auto network = parse_network_model(a.network);
  if (!network)
    throw InputError("--network '" + a.network + "' is not a network model; valid: " + join(network_model_names()));
  run.network = *network;
  const auto a2a = parse_all_to_all_algorithm(a.a2a);
  if (!a2a)
    throw InputError("--a2a '" + a.a2a + "' is not an all-to-all algorithm; valid: " +
                     join(all_to_all_algorithm_names()));
  run.all_to_all = *a2a;
  try {
    run.routing = parse_routing_spec(a.routing, SourceLocation{});
  } catch (const InputError& e) {
    throw InputError("--routing: " + e.rule());
  }
  return run;
}

// The hardware the step runs on: the file (with its calibration), or with --loopback its GPU
// shared by the job's ranks (--ep, or every GPU of the file).
ClusterSpec load_step_cluster(const StepArgs& a) {
  ClusterSpec cluster = load_hardware_spec(a.hardware_path, a.calibration_path);
  if (!a.loopback) return cluster;
  return loopback_cluster(cluster, a.ep_size > 0 ? a.ep_size : cluster.num_gpus());
}

struct SimulateOutputs {
  std::string json_path;
  std::string trace_path;
  std::string timeline_path;
  bool timing = false;
};

int run_simulate(StepArgs& a, const SimulateOutputs& outputs) {
  const std::string& json_path = outputs.json_path;
  const std::string& trace_path = outputs.trace_path;
  const std::string& timeline_path = outputs.timeline_path;
  const int to_stdout = (json_path == "-") + (trace_path == "-") + (timeline_path == "-");
  if (to_stdout > 1)
    throw InputError("only one of --json -, --trace - and --timeline - can write to stdout; give the others a file name");
  PhaseTimer timer;
  resolve_step_args(a);
  const ModelSpec model = load_model_spec(a.model_path);
  const ClusterSpec cluster = load_step_cluster(a);
  const RunSpec run = to_run_spec(a);
  check_simulated_layers(model, run.num_moe_layers);
  timer.mark("load");
  BuildOptions options;
  options.representative_rank = !a.all_ranks;
  options.all_replicas = a.all_ranks;
  options = build_options_for(cluster, run, options);
  const LayerDims dims = derive_layer_dims(model, cluster, run);
  const std::optional<RoutingPlan> routing = make_layer_routing(dims, run);
  const RoutingStats routing_stats = routing ? routing->stats() : uniform_routing_stats(routing_shape(dims));
  timer.mark("routing");
  const TaskGraph graph = build_moe_graph(model, cluster, run, options, routing ? &*routing : nullptr);
  timer.mark("build");
  const EngineRun result = simulate_graph(graph, cluster, NetworkChoice{run.network, run.all_to_all});
  const Trace& trace = result.trace;
  timer.mark("simulate");
  const StepMetrics metrics = compute_step_metrics(graph, trace);
  const std::string network =
      cluster.pure_alpha_beta()
          ? std::string("pure alpha-beta costs (hardware alpha_beta.simulate)")
          : std::string(to_string(resolve_network_model(cluster, run.network))) + " model, " +
                std::string(to_string(run.all_to_all)) + " all-to-all";
  const ReportInputs in{model, cluster, run, dims, graph, trace, metrics, result.memory, kVersion, network,
                        &routing_stats};
  std::ostringstream summary;
  write_summary(summary, in);
  // When a machine-readable output goes to stdout, the summary moves to stderr.
  const bool stdout_taken = to_stdout > 0;
  (stdout_taken ? std::cerr : std::cout) << summary.str();
  if (!json_path.empty()) write_output(json_path, report_json(in));
  if (!trace_path.empty()) write_output(trace_path, perfetto_trace_json(graph, trace, result.memory));
  if (!timeline_path.empty()) {
    std::ostringstream timeline;
    write_timeline(timeline, graph, trace, result.memory);
    write_output(timeline_path, timeline.str());
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
  resolve_step_args(a);
  const ModelSpec model = load_model_spec(a.model_path);
  const ClusterSpec cluster = load_step_cluster(a);
  const RunSpec run = to_run_spec(a);
  BuildOptions options;
  options.representative_rank = !a.all_ranks;
  options.all_replicas = a.all_ranks;
  const TaskGraph graph = build_moe_graph(model, cluster, run, build_options_for(cluster, run, options));
  write_output(out_path, export_graph_json(graph));
  return 0;
}

int run_graph_check(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(SourceLocation{path, 0, 0}, "cannot open the graph file");
  std::stringstream text;
  text << in.rdbuf();
  const TaskGraph graph = import_graph_json(text.str(), path);
  check_acyclic(graph);
  std::cout << path << ": " << graph.num_tasks() << " tasks, " << graph.edges().size()
            << " edges, " << graph.simulated_ranks().size() << " simulated rank(s) of "
            << graph.world_size() << ", acyclic\n";
  return 0;
}

int main_impl(int argc, char** argv) {
  CLI::App app{"moesim: predict and measure the time and memory of Mixture-of-Experts training steps"};
  app.require_subcommand(1);
  bool show_version = false;
  app.add_flag("--version", show_version, "print the version and exit");

  StepArgs sim_args;
  SimulateOutputs sim_outputs;
  CLI::App* simulate = app.add_subcommand("simulate", "simulate one training step of MoE layers");
  add_step_options(simulate, sim_args);
  simulate->add_option("--json", sim_outputs.json_path, "write the full report as JSON ('-' for stdout)");
  simulate->add_option("--trace", sim_outputs.trace_path, "write a Chrome/Perfetto trace JSON ('-' for stdout)");
  simulate->add_option("--timeline", sim_outputs.timeline_path,
                       "write the compact text timeline: every task's start and end in ns, each rank's peak memory "
                       "(the format of tests/golden/; '-' for stdout)");
  simulate->add_flag("--timing", sim_outputs.timing, "print wall-clock time per phase on stderr");

  CLI::App* graph_cmd = app.add_subcommand("graph", "task graph tools");
  graph_cmd->require_subcommand(1);
  StepArgs export_args;
  std::string export_path = "-";
  CLI::App* graph_export = graph_cmd->add_subcommand("export", "write the task graph as JSON");
  add_step_options(graph_export, export_args);
  graph_export->add_option("--output,-o", export_path, "output file ('-' for stdout)")->capture_default_str();
  std::string check_path;
  CLI::App* graph_check = graph_cmd->add_subcommand("check", "validate a task graph JSON file");
  graph_check->add_option("file", check_path, "graph JSON written by `moesim graph export`")->required();

  PlanArgs plan_args;
  CLI::App* plan = app.add_subcommand(
      "plan", "rank pipeline degrees and memory strategies for a model on a cluster (docs/planning.md)");
  plan->add_option("--model", plan_args.model_path, "model preset YAML")->required();
  plan->add_option("--hardware", plan_args.hardware_path, "cluster, node or GPU YAML")->required();
  plan->add_option("--calibration", plan_args.calibration_path, "calibration YAML measured by `moesim calibrate`");
  plan->add_option("--tokens", plan_args.tokens, "tokens per GPU: one count or a list (2048,4096)")->required();
  plan->add_option("--chunks,-n", plan_args.chunks, "pipeline degrees to try: list or ranges (default 1-16, capped by capacity)");
  plan->add_option("--strategies", plan_args.strategies,
                   "memory strategies: all (with --checkpoint: none) or a list of none,s1,s2,s3,s4")
      ->capture_default_str();
  plan->add_option("--objective", plan_args.objective, "what best means: time|memory|balanced")->capture_default_str();
  plan->add_option("--method", plan_args.method, "selection method: simulate|pipemoe|mpipemoe-online|mpmoe-model|all")
      ->capture_default_str();
  plan->add_option("--order", plan_args.order, "ordering policy: sequential|mpipemoe|fastermoe|tutel")->capture_default_str();
  plan->add_option("--ep", plan_args.ep_size, "expert-parallel group size (0 = every GPU / --tp)")
      ->capture_default_str();
  plan->add_option("--tp", plan_args.tp_size,
                   "tensor-parallel degree (DeepSpeed-TED): the simulate and mpipemoe-online methods only")
      ->capture_default_str();
  add_layout_flags(plan, plan_args.layout);
  plan->add_option("--layers", plan_args.layers, "MoE layers simulated back to back")->capture_default_str();
  plan->add_option("--slots", plan_args.slots, "buffer slots per reused tensor with s1-s4: 1 or 2")->capture_default_str();
  plan->add_option("--optimizer", plan_args.optimizer, "adam|momentum|sgd")->capture_default_str();
  plan->add_flag("--no-routing-data", plan_args.no_routing_data, "do not count gate scores and indices (the papers' accounting)");
  plan->add_option("--routing", plan_args.routing,
                   "token routing: uniform | zipf:<s> | matrix:<csv file> (the simulate method; the model-based "
                   "methods assume balanced routing)")
      ->capture_default_str();
  plan->add_option("--json", plan_args.json_path, "write the plan as JSON ('-' for stdout)");
  plan->add_option("--jobs,-j", plan_args.jobs, "simulations in parallel (0 = every core)")->capture_default_str();
  plan->add_flag("--fit", plan_args.fit, "find the smallest node count of the hardware preset that fits");
  plan->add_option("--max-nodes", plan_args.max_nodes, "--fit: largest node count tried")->capture_default_str();
  plan->add_option("--max-step-ms", plan_args.max_step_ms, "--fit: the step must take at most this long (ms)");

  SweepArgs sweep_args;
  CLI::App* sweep = app.add_subcommand(
      "sweep", "simulate a grid of configurations on all cores; CSV, JSON and HTML reports (docs/planning.md)");
  sweep->add_option("--grid", sweep_args.grid_path, "sweep YAML (kind: sweep); the flags below override its axes");
  sweep->add_option("--model", sweep_args.models, "model preset YAML(s), comma-separated");
  sweep->add_option("--hardware", sweep_args.hardware, "hardware preset YAML(s), comma-separated");
  sweep->add_option("--gpus", sweep_args.gpus, "GPU counts (multiples of the preset's GPUs per node)");
  sweep->add_option("--tokens", sweep_args.tokens, "tokens per GPU: list or ranges");
  sweep->add_option("--global-tokens", sweep_args.global_tokens,
                    "instead of --tokens: tokens per step of the whole cluster, list or ranges; each configuration "
                    "gets global / (GPUs / tp) per GPU");
  sweep->add_option("--tp", sweep_args.tp,
                    "tensor-parallel degrees, list or ranges (default 1); the expert-parallel group spans GPUs / tp");
  add_layout_flags(sweep, sweep_args.layout);
  sweep->add_option("--chunks,-n", sweep_args.chunks, "pipeline degrees (default without --grid: 1,2,4,8)");
  sweep->add_option("--strategies", sweep_args.strategies, "memory strategies: all or none,s1,s2,s3,s4 (default none)");
  sweep->add_option("--routing", sweep_args.routing, "routing values, comma-separated: uniform, zipf:<s>, matrix:<csv file>");
  sweep->add_option("--order", sweep_args.order, "ordering policy: sequential|mpipemoe|fastermoe|tutel");
  sweep->add_option("--layers", sweep_args.layers, "MoE layers simulated back to back (default 1)");
  sweep->add_option("--step-target-ms", sweep_args.step_target_ms, "capacity view: the step must take at most this (ms)");
  sweep->add_option("--csv", sweep_args.csv_path, "write the CSV ('-' for stdout; the default when no output is named)");
  sweep->add_option("--json", sweep_args.json_path, "write the JSON ('-' for stdout)");
  sweep->add_option("--html", sweep_args.html_path, "write the self-contained HTML report");
  sweep->add_option("--jobs,-j", sweep_args.jobs, "threads (0 = every core)")->capture_default_str();
  sweep->add_flag("--timing", sweep_args.timing, "print the wall-clock time of the sweep on stderr");
  CollectiveArgs coll;
  CLI::App* collective = app.add_subcommand(
      "collective", "simulate one collective over a size range, printed as nccl-tests prints it");
  collective->add_option("--hardware", coll.hardware_path, "cluster or node YAML")->required();
  CLI::Option* coll_op =
      collective->add_option("--op", coll.op, "all-to-all|all-reduce|all-gather|reduce-scatter")->capture_default_str();
  collective->add_option("--ranks", coll.ranks, "ranks (0 = every GPU of the cluster)")->capture_default_str();
  collective->add_option("--min-bytes,-b", coll.min_bytes, "smallest size (K, M, G)")->capture_default_str();
  collective->add_option("--max-bytes,-e", coll.max_bytes, "largest size (K, M, G)")->capture_default_str();
  collective->add_option("--step-factor,-f", coll.step_factor, "size multiplication factor")->capture_default_str();
  collective->add_option("--network", coll.network, "auto|alpha-beta|flow")->capture_default_str();
  collective->add_option("--a2a", coll.a2a, "all-to-all algorithm: pairwise|2dh")->capture_default_str();
  collective->add_option("--calibration", coll.calibration_path,
                         "calibration YAML, e.g. the network fitted by `moesim calibrate --alltoall-log`");
  CLI::Option* coll_against = collective->add_option(
      "--against", coll.against_log,
      "an nccl-tests log (alltoall_perf, all_reduce_perf, all_gather_perf, reduce_scatter_perf): simulate its sizes, "
      "on the GPUs its ranks ran on, and print measured and simulated times side by side");
  for (const char* range : {"--min-bytes", "--max-bytes", "--step-factor"}) coll_against->excludes(collective->get_option(range));

  RunArgs run_args;
  CLI::App* run_cmd = app.add_subcommand(
      "run", "measure one step of the MoE layer on GPUs next to the simulator's prediction (docs/runtime.md)");
  run_cmd->add_option("--model", run_args.model_path, "model preset YAML")->required();
  run_cmd->add_option("--hardware", run_args.hardware_path, "cluster, node or GPU YAML (for the prediction)")->required();
  run_cmd->add_option("--calibration", run_args.calibration_path,
                      "calibration YAML of this GPU, for the prediction (`moesim calibrate`)");
  run_cmd->add_option("--tokens", run_args.tokens, "tokens per GPU (B)")->required();
  run_cmd->add_option("--chunks,-n", run_args.chunks, "pipeline chunks (n)")->capture_default_str();
  run_cmd->add_option("--layers", run_args.layers, "MoE layers back to back, each with its own parameters")
      ->capture_default_str();
  run_cmd->add_option("--strategy", run_args.strategy, "memory strategy: none|s1|s2|s3|s4")->capture_default_str();
  run_cmd->add_option("--order", run_args.order, "ordering policy: sequential|mpipemoe|fastermoe|tutel")->capture_default_str();
  run_cmd->add_option("--slots", run_args.slots, "buffer slots per reused tensor with s1-s4: 1 or 2")->capture_default_str();
  run_cmd->add_option("--dtype", run_args.dtype, "storage and GEMM dtype: fp32|tf32|bf16|fp16 (default: the model's)");
  run_cmd->add_option("--iters", run_args.iters, "timed steps")->capture_default_str();
  run_cmd->add_option("--warmup", run_args.warmup, "untimed steps first")->capture_default_str();
  run_cmd->add_option("--json", run_args.json_path, "write the measured report as JSON ('-' for stdout)");
  run_cmd->add_option("--trace", run_args.trace_path, "write a Chrome/Perfetto trace of the median step");
  run_cmd->add_flag("--check", run_args.check, "also check the numerics against the CPU reference at a small size");
  run_cmd->add_option("--ranks", run_args.ranks, "expert-parallel ranks (GPUs of this process, or virtual with --loopback)")
      ->capture_default_str();
  run_cmd->add_flag("--loopback", run_args.loopback, "run every rank on GPU 0 (all-to-all as device copies)");
  run_cmd->add_option("--seed", run_args.seed, "seed of the inputs and parameters")->capture_default_str();

  CalibrateArgs cal_args;
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "measure this GPU's launch gap, HBM, PCIe and GEMM times, or fit the network to an all-to-all (an "
      "nccl-tests log with --alltoall-log, or --collectives), into a calibration file (docs/calibration.md)");
  calibrate->add_option("--hardware", cal_args.hardware_path,
                        "the node or GPU preset of this GPU (its name goes into the file); for a log across nodes, "
                        "a cluster of them")
      ->required();
  calibrate->add_option("--out,-o", cal_args.out_path, "calibration YAML to write (e.g. hardware/calibration/<gpu>.yaml)")
      ->required();
  calibrate->add_option("--dtypes", cal_args.dtypes, "GEMM dtypes, comma-separated (default: every dtype the preset's GPU has)");
  calibrate->add_option("--dims", cal_args.dims, "GEMM m, n and k axis, increasing (default 8,16,...,16384)");
  calibrate->add_option("--copy-size", cal_args.copy_size, "bytes of the large copies (K, M, G)")->capture_default_str();
  calibrate->add_option("--min-time-ms", cal_args.min_time_ms, "each point repeats for at least this long (at most 1000 times)")
      ->capture_default_str();
  CLI::Option* cal_device = calibrate->add_option("--device", cal_args.device, "GPU ordinal")->capture_default_str();
  CLI::Option* cal_log = calibrate->add_option(
      "--alltoall-log", cal_args.alltoall_log,
      "an nccl-tests alltoall_perf log: fit the node's intra-node network to it (GPUs of one node) or the "
      "cluster's inter-node network (GPUs on several nodes) instead of measuring this GPU (no GPU needed)");
  calibrate->add_option("--ranks", cal_args.ranks,
                        "with --alltoall-log: the GPUs the log ran on, if it has no '#  Rank' lines; with "
                        "--collectives: measure the first N GPUs (default all)");
  CLI::Option* cal_coll = calibrate->add_flag(
      "--collectives", cal_args.collectives,
      "measure the all-to-all between every GPU this process sees (NCCL) and fit the node's intra-node network to it");
  calibrate->add_option("--base", cal_args.base_path,
                        "a calibration of the node (its GPU; for a log across nodes, also its intra-node network) "
                        "to write out with the fitted sections added");
  for (const char* gpu_only : {"--dtypes", "--dims", "--copy-size", "--min-time-ms"}) {
    cal_log->excludes(calibrate->get_option(gpu_only));
    cal_coll->excludes(calibrate->get_option(gpu_only));
  }
  cal_log->excludes(cal_device);
  cal_coll->excludes(cal_device);
  cal_coll->excludes(cal_log);

  CompareArgs compare_args;
  CLI::App* compare = app.add_subcommand(
      "compare", "put two step reports side by side per step, stage and task (measured vs simulated)");
  compare->add_option("reference", compare_args.reference_path, "reference report, e.g. `moesim run --json`")
      ->required();
  compare->add_option("predicted", compare_args.predicted_path,
                      "predicted report, e.g. `moesim simulate --all-ranks --json` of the same configuration")
      ->required();
  compare->add_option("--csv", compare_args.csv_path, "write one row per task ('-' for stdout)");
  compare->add_option("--json", compare_args.json_path, "write the comparison as JSON ('-' for stdout)");
  compare->add_option("--worst", compare_args.worst, "tasks with the largest differences listed")->capture_default_str();

  // --version must work without a subcommand.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--version") {
      std::cout << "moesim " << kVersion << "\n";
      return 0;
    }
  }
  // CLI11 would only say "a subcommand is required"; name the unknown command instead.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string first = argv[1];
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == first;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) throw InputError("unknown command '" + first + "'; commands: " + names);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "error: " << e.what() << "\nRun with --help for usage.\n";
    return 2;
  }

  if (simulate->parsed()) return run_simulate(sim_args, sim_outputs);
  if (graph_export->parsed()) return run_graph_export(export_args, export_path);
  if (graph_check->parsed()) return run_graph_check(check_path);
  if (plan->parsed()) return run_plan(plan_args, kVersion);
  if (sweep->parsed()) {
    sweep_args.layout.zero_given = sweep->count("--zero") > 0;
    sweep_args.layout.checkpoint_given = sweep->count("--checkpoint") > 0;
    return run_sweep_command(sweep_args, kVersion);
  }
  if (collective->parsed()) {
    coll.op_given = coll_op->count() > 0;
    coll.against_given = coll_against->count() > 0;
    return run_collective(coll, std::cout);
  }
  if (run_cmd->parsed()) return run_measure(run_args, kVersion);
  if (compare->parsed()) return run_compare(compare_args);
  if (calibrate->parsed()) {
    for (int i = 0; i < argc; ++i) cal_args.command_line += (i ? " " : "") + std::string(i ? argv[i] : "moesim");
    return run_calibrate(cal_args, kVersion);
  }
  return 2;
}

}  // namespace
}  // namespace moesim::cli

int main(int argc, char** argv) {
  try {
    return moesim::cli::main_impl(argc, argv);
  } catch (const moesim::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const moesim::InternalError& e) {
    std::cerr << "moesim: " << e.what() << "\n(this is a bug in moesim; please report it)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "moesim: internal error: " << e.what() << "\n";
    return 1;
  }
}
