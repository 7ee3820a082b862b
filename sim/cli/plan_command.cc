#include "sim/cli/plan_command.h"

#include <cmath>
#include <iostream>
#include <sstream>

#include "sim/cli/cluster_flags.h"
#include "sim/cli/layout_flags.h"
#include "sim/cli/list_args.h"
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

}  // namespace

int run_plan(const PlanArgs& a, const std::string& version) {
  check_outputs({{"--json", a.json_path}});
  if (a.model_path.empty()) throw InputError("--model is required");
  if (a.hardware_path.empty()) throw InputError("--hardware is required");
  if (a.tokens.empty()) throw InputError("--tokens is required (one count or a list: 2048,4096)");
  check_layout_flags(a.tp_size, a.tp_size, a.layout.no_dtd, a.layout.zero_stage);

  search::PlanRequest req;
  req.model = load_model_spec(resolve_model_arg(a.model_path, "--model"));
  req.cluster = scaled_cluster(load_hardware_spec(resolve_hardware_arg(a.hardware_path, "--hardware"), a.calibration_path),
                               a.gpus, a.nodes);
  req.run.ep_size = a.ep_size;
  req.run.tp_size = a.tp_size;
  req.run.drop_duplicate_tokens = !a.layout.no_dtd;
  req.run.grad_sync = a.layout.grad_sync;
  req.run.zero_stage = a.layout.zero_stage;
  req.run.checkpoint = parse_checkpoint_flag(a.layout.checkpoint);
  req.run.num_moe_layers = a.layers;
  req.run.slots = a.slots;
  req.run.count_routing_data = !a.no_routing_data;
  try {
    req.run.routing = parse_routing_spec(a.routing, SourceLocation{});
  } catch (const InputError& e) {
    throw InputError("--routing: " + e.rule());
  }
  req.run.order = parse_named<OrderPolicy>("--order", a.order, parse_order_policy, order_policy_names());
  req.run.optimizer = parse_named<Optimizer>("--optimizer", a.optimizer, parse_optimizer, optimizer_names());
  req.objective = parse_named<PlanObjective>("--objective", a.objective, parse_plan_objective, plan_objective_names());
  req.tokens = parse_int_list("--tokens", a.tokens, 1, kMaxTokensPerGpu);
  if (!a.chunks.empty()) req.chunk_counts = parse_chunk_list("--chunks", a.chunks);
  // `all` means every strategy the run can use: activation checkpointing replaces the MPipeMoE
  // ones, so it leaves none (a list naming s1-s4 with --checkpoint is refused with the rule).
  req.strategies = req.run.checkpoint != ActivationCheckpointing::kNone && a.strategies == "all"
                       ? std::vector<MemoryStrategy>{MemoryStrategy::kNone}
                       : parse_strategy_list("--strategies", a.strategies);
  if (a.method == "all") {
    req.methods = {search::PlanMethod::kSimulate, search::PlanMethod::kPipeMoE, search::PlanMethod::kOnline,
                   search::PlanMethod::kMpmoeModel};
  } else {
    req.methods = {parse_named<search::PlanMethod>("--method", a.method, search::parse_plan_method,
                                                   search::plan_method_names())};
  }
  req.jobs = a.jobs == 0 ? search::default_jobs() : a.jobs;
  search::resolve_plan_request(req);  // every configuration checked before any simulation

  PlanReport report = search::plan(req, version);
  if (a.fit) {
    report.fit = search::fit_cluster(req, a.max_nodes, static_cast<TimeNs>(std::llround(a.max_step_ms * 1e6)));
    report.has_fit = true;
  }
  std::ostringstream text;
  write_plan_text(text, report);
  (a.json_path == "-" ? std::cerr : std::cout) << text.str();
  if (!a.json_path.empty()) write_output("--json", a.json_path, plan_json(report));
  return 0;
}

}  // namespace moesim::cli
