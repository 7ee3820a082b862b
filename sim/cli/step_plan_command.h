// `moesim plan --global-batch N ...`: the layout planner of the whole training step
// (sim/search/layout_planner.h): the fastest layouts of a model on the cluster, or with
// --target-tokens-per-day the fewest whole nodes that reach a token rate. --chunks is the list of
// the MoE layers' sub-stage chunk counts to try; the MoE-layer plan's other flags (--tokens, --tp,
// ...) are refused with --global-batch, and these flags without it.
#pragma once

#include "sim/cli/run_option_flags.h"

#include <functional>
#include <string>
#include <vector>

#include "sim/cli/plan_command.h"

namespace moesim::cli {

struct StepPlanArgs {
  long long global_batch = 0;
  int top = 5;                       // --top K
  double target_tokens_per_day = 0;  // 0: not given
  // --seq, --attention, --host-launch-us, --dispatcher: one value for every layout, the whole
  // step's options (sim/spec/step_options.h).
  StepOptionFlags options;
  std::string zero_stages;     // --zero-stages: "" = search::kDefaultZeroStages; "0-3", "1,3"
  std::string schedules;       // --schedules: "" = 1f1b, interleaved with vpp > 1; "1f1b,zb-h1"
  // The axes the plan fixes (search::LayoutAxes), lists or ranges; "" = every legal value. --tp
  // and --ep come in PlanArgs, which the MoE-layer plan shares.
  std::string pp, vpp, cp, etp, micro_batch;
  std::string recompute;          // --recompute: the recomputations to try, a list; "" = the planner's
  std::string recompute_modules;  // --recompute-modules: what selective re-runs; "" = core_attn
  bool overlap_moe_ep_comm = false;  // --overlap-moe-expert-parallel-comm: try the combined 1F1B too
  bool tp_pp_dp_mapping = false;     // --use-tp-pp-dp-mapping: try the rank order tp-cp-pp-dp too
};

// The flags only the whole-step plan reads, and the MoE-layer plan's that it refuses.
const std::vector<std::string>& step_plan_only_flags();
const std::vector<std::string>& layer_plan_only_flags();

// `given(flag)`: whether the flag was on the command line. The shared flags (--model, --hardware,
// --gpus, --nodes, --calibration, --network, --json, --jobs, --max-nodes) come in `plan`.
int run_step_plan(const PlanArgs& plan, const StepPlanArgs& step, const std::function<bool(const std::string&)>& given,
                  const std::string& version);

}  // namespace moesim::cli
