#include "sim/cli/plan_command.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "sim/cli/cluster_flags.h"
#include "sim/cli/layout_flags.h"
#include "sim/cli/list_args.h"
#include "sim/cli/memory_limit_flag.h"
#include "sim/cli/mpi_world.h"
#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/report/plan_report.h"
#include "sim/search/planner.h"
#include "sim/search/thread_pool.h"
#include "sim/spec/loader.h"
#include "sim/spec/presets.h"
#include "sim/spec/yaml_reader.h"

namespace moesim::cli {
namespace {

template <typename T, typename Parse>
T parse_named(const std::string& flag, const std::string& value, Parse parse, const std::vector<std::string>& names) {
  const auto v = parse(value);
  if (!v) throw InputError(flag + " '" + value + "' is not valid; valid: " + YamlValue::join_names(names));
  return *v;
}

std::vector<search::PlanMethod> plan_methods(const std::string& method) {
  if (method == "all") {
    return {search::PlanMethod::kSimulate, search::PlanMethod::kPipeMoE, search::PlanMethod::kOnline,
            search::PlanMethod::kMpmoeModel};
  }
  return {parse_named<search::PlanMethod>("--method", method, search::parse_plan_method, search::plan_method_names())};
}

// A plan row as the integers that travel between MPI ranks (the doubles as their bit patterns).
constexpr std::size_t kRowFields = 11;

void row_to_fields(const PlanRow& r, std::int64_t* f) {
  const std::int64_t v[kRowFields] = {r.num_chunks, static_cast<std::int64_t>(r.strategy), r.step_ns, r.forward_ns,
                                      r.backward_ns, r.peak_bytes, r.model_peak_bytes, r.capacity_bytes, r.fits ? 1 : 0,
                                      std::bit_cast<std::int64_t>(r.speedup), r.memory_saved_bytes};
  std::copy(v, v + kRowFields, f);
}

PlanRow row_from_fields(const std::int64_t* f) {
  PlanRow r;
  r.num_chunks = static_cast<int>(f[0]);
  r.strategy = static_cast<MemoryStrategy>(f[1]);
  r.step_ns = f[2];
  r.forward_ns = f[3];
  r.backward_ns = f[4];
  r.peak_bytes = f[5];
  r.model_peak_bytes = f[6];
  r.capacity_bytes = f[7];
  r.fits = f[8] != 0;
  r.speedup = std::bit_cast<double>(f[9]);
  r.memory_saved_bytes = f[10];
  return r;
}

// --tp or --ep of the MoE-layer plan: one degree in [min, kMaxGroupSize], `fallback` when not
// given; a list is the layout plan's (--global-batch).
int single_degree(const char* flag, const std::string& text, int min, int fallback) {
  if (text.empty()) return fallback;
  const std::vector<std::int64_t> values = parse_int_list(flag, text, min, kMaxGroupSize);
  if (values.size() != 1)
    throw InputError(std::string(flag) + " '" + text + "': the MoE-layer plan takes one degree; lists of values to try "
                     "are for the layout plan of a whole step (--global-batch)");
  return static_cast<int>(values.front());
}

// The request the flags describe, resolved: every configuration checked before any simulation.
search::PlanRequest plan_request(const PlanArgs& a) {
  if (a.model_path.empty()) throw InputError("--model is required");
  if (a.hardware_path.empty()) throw InputError("--hardware is required");
  if (a.tokens.empty())
    throw InputError("--tokens is required (one count or a list: 2048,4096), or --global-batch to plan the layout of a "
                     "whole training step");
  const int tp = single_degree("--tp", a.tp, 1, 1);
  const int ep = single_degree("--ep", a.ep, 0, 0);
  RunSpec run;
  a.options.apply(run);
  check_no_dtd_flag(a.options.switched_on("drop_duplicate_tokens"), tp);

  search::PlanRequest req;
  req.model = load_model_spec(resolve_model_arg(a.model_path, "--model"));
  req.cluster = scaled_cluster(load_hardware_spec(resolve_hardware_arg(a.hardware_path, "--hardware"), a.calibration_path),
                               a.gpus, a.nodes);
  req.run = run;
  req.run.ep_size = ep;
  req.run.tp_size = tp;
  req.objective = parse_named<PlanObjective>("--objective", a.objective, parse_plan_objective, plan_objective_names());
  req.tokens = run_option_list("tokens_per_gpu", "--tokens", a.tokens);
  if (!a.chunks.empty()) req.chunk_counts = parse_chunk_list("--chunks", a.chunks);
  // `all` means every strategy the run can use: activation checkpointing replaces the MPipeMoE
  // ones, so it leaves none (a list naming s1-s4 with --checkpoint is refused with the rule).
  req.strategies = req.run.checkpoint != ActivationCheckpointing::kNone && a.strategies == "all"
                       ? std::vector<MemoryStrategy>{MemoryStrategy::kNone}
                       : parse_strategy_list("--strategies", a.strategies);
  req.methods = plan_methods(a.method);
  req.jobs = a.jobs == 0 ? search::default_jobs() : a.jobs;
  req.memory_limit_bytes = memory_limit_from_flag(a.memory_limit);
  search::resolve_plan_request(req);
  return req;
}

}  // namespace

const std::vector<std::string>& plan_option_keys() {
  static const std::vector<std::string> keys{"drop_duplicate_tokens", "grad_sync", "zero_stage", "checkpoint",
                                             "chunk_alignment", "order", "num_moe_layers", "seed", "slots",
                                             "optimizer", "routing_data", "network", "compute", "routing"};
  return keys;
}

int run_plan(const PlanArgs& a, const std::string& version) {
  // Under mpirun every rank checks the same input and a failure is reported once (World::agree);
  // only rank 0 writes, so only its output path must be writable.
  World world;
  search::PlanRequest req;
  std::string error;
  try {
    if (world.rank() == 0) check_outputs({{"--json", a.json_path}});
    req = plan_request(a);
  } catch (const InputError& e) {
    error = e.what();
  }
  if (!world.agree(error)) return 0;
  if (world.size() > 1) {
    if (world.rank() == 0)
      std::fprintf(stderr, "plan: simulations spread over %d MPI ranks x %d threads\n", world.size(), req.jobs);
    // Every rank simulates its share of each batch and gets every row back, so all ranks walk the
    // same plan (and --fit's same node counts) and rank 0 prints what one process would.
    req.simulate_rows = [&world, jobs = req.jobs](std::size_t count, const std::function<PlanRow(std::size_t)>& simulate) {
      const std::vector<std::int64_t> fields = evaluate_everywhere(
          world, count, kRowFields, jobs, [&](std::size_t i, std::int64_t* f) { row_to_fields(simulate(i), f); });
      std::vector<PlanRow> rows;
      for (std::size_t i = 0; i < count; ++i) rows.push_back(row_from_fields(&fields[i * kRowFields]));
      return rows;
    };
  }
  PlanReport report;
  try {
    report = search::plan(req, version);
    if (a.fit) {
      report.fit = search::fit_cluster(req, a.max_nodes, static_cast<TimeNs>(std::llround(a.max_step_ms * 1e6)));
      report.has_fit = true;
    }
  } catch (const QuietExit&) {
    return 0;  // another rank reported the failure
  } catch (const InputError& e) {
    // Raised by every rank alike outside the simulations (e.g. --fit's memory limit at a node
    // count): reported once.
    world.agree(e.what());
    return 0;
  }
  if (world.rank() != 0) return 0;
  std::ostringstream text;
  write_plan_text(text, report);
  (a.json_path == "-" ? std::cerr : std::cout) << text.str();
  if (!a.json_path.empty()) write_output("--json", a.json_path, plan_json(report));
  return 0;
}

}  // namespace moesim::cli
