// Outputs of `moesim plan`: the ranked table of (pipeline degree n, memory strategy) configurations,
// the picks of each selection method beside the exhaustive best, the online search's trail, and the
// smallest-cluster (--fit) search.
//
// The types here are plain data filled by sim/search/planner.h; this module only formats them
// (design.md: report does not know how results were produced). Text follows design.md lesson 8: a
// `#` preamble naming the configuration, fixed-width columns with units; plan_json is its twin.
// Every number is printed with a fixed format, so the same plan gives the same bytes.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/units.h"
#include "sim/spec/parallel_layout.h"
#include "sim/spec/types.h"

namespace moesim {

// What "best" means: kTime = fastest step that fits; kForward = fastest forward pass of the
// simulated MoE layers that fits (the quantity the PipeMoE model predicts, so its pick is judged on
// its own terms); kMemory = lowest peak (then fastest); kBalanced = lowest step_time x peak_memory
// among those that fit (equal weight to relative changes of either).
enum class PlanObjective { kTime, kForward, kMemory, kBalanced };
// The time an objective compares: the forward pass for kForward, else the step.
TimeNs objective_time_ns(TimeNs step_ns, TimeNs forward_ns, PlanObjective objective);
std::string_view to_string(PlanObjective o);
std::optional<PlanObjective> parse_plan_objective(std::string_view s);
std::vector<std::string> plan_objective_names();

// One simulated configuration.
struct PlanRow {
  int num_chunks = 1;
  MemoryStrategy strategy = MemoryStrategy::kNone;
  TimeNs step_ns = 0;
  TimeNs forward_ns = 0;
  TimeNs backward_ns = 0;
  std::int64_t peak_bytes = 0;        // device peak of the simulated layers on the fullest rank
  std::int64_t model_peak_bytes = 0;  // the whole model's on the fullest GPU (sim/memory/model_memory.h)
  std::int64_t capacity_bytes = 0;    // HBM of one GPU
  bool fits = false;                  // model_peak_bytes <= capacity_bytes
  double speedup = 0;                 // baseline step / this step (baseline: n = 1, strategy none)
  std::int64_t memory_saved_bytes = 0;  // baseline whole-model peak - this one (negative: uses more)
};

// The configuration a selection method picked, and how it fares in simulation.
struct MethodPick {
  std::string method;     // simulate, pipemoe, mpipemoe-online, mpmoe-model
  bool found = false;     // false: the method had nothing to pick (e.g. nothing fits)
  int num_chunks = 0;
  MemoryStrategy strategy = MemoryStrategy::kNone;
  TimeNs step_ns = 0;     // the pick's simulated step
  TimeNs forward_ns = 0;  // and its forward pass
  bool fits = false;
  TimeNs loss_ns = 0;     // the objective's time (objective_time_ns) minus the exhaustive best's (0: it is the best)
  std::string detail;     // the method's own numbers (model constants, regime, trials)
};

// One token count: every configuration, ranked by the objective (fitting ones first).
struct PlanTable {
  std::int64_t tokens = 0;
  std::int64_t global_tokens = 0;  // the cluster's batch: GPUs / tp x tokens
  PlanRow baseline;             // n = 1, strategy none (simulated even when not in the set)
  std::vector<PlanRow> rows;    // ranked
  int best = -1;                // index into rows of the objective's pick; -1 when nothing fits
  std::vector<MethodPick> picks;
};

struct OnlineTrialRecord {
  std::int64_t tokens = 0;
  int num_chunks = 0;
  MemoryStrategy strategy = MemoryStrategy::kNone;
  TimeNs step_ns = 0;  // the time the search compared: the forward pass under objective forward
};

struct OnlineRange {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  int num_chunks = 0;
  MemoryStrategy strategy = MemoryStrategy::kNone;
};

// The MPipeMoE online search replayed over the token sequence.
struct OnlineReplay {
  std::vector<std::int64_t> sequence;  // token counts in replay order
  std::vector<OnlineTrialRecord> trials;
  std::int64_t cache_hits = 0;
  std::int64_t range_hits = 0;
  std::int64_t exhaustive_trials = 0;  // what exhaustive search would have spent on the same calls
  std::vector<OnlineRange> ranges;
};

// --fit: cluster sizes tried, smallest first.
struct FitStep {
  int num_nodes = 0;
  int num_gpus = 0;
  int tp_size = 1;           // the request's tensor-parallel degree
  int ep_size = 0;           // num_gpus / tp_size when valid
  bool valid = false;        // false: the model cannot be laid out on this size (reason says why)
  std::string reason;
  bool found = false;        // a configuration fits (and meets the step target, if any)
  PlanRow best;              // the fastest fitting configuration at this size
};

struct FitReport {
  int max_nodes = 0;
  TimeNs max_step_ns = 0;    // 0: no target
  std::vector<FitStep> steps;
  int answer = -1;           // index into steps of the smallest size that works; -1 none
};

struct PlanReport {
  std::string model;
  std::string cluster;
  std::string calibration;  // the calibration file applied to the GPU, or empty
  int num_gpus = 0;
  ParallelLayout layout;  // DeepSpeed-TED: tp x ep x dp = num_gpus (tp 1: expert parallelism)
  bool drop_duplicate_tokens = false;  // in effect: tp_size > 1 and not turned off
  bool grad_sync = false;
  int zero_stage = 0;
  ActivationCheckpointing checkpoint = ActivationCheckpointing::kNone;
  std::string order;
  std::string network;  // the collective model the rows were simulated with (auto resolved)
  std::string routing = "uniform";  // RoutingSpec::to_string()
  int num_moe_layers = 1;
  PlanObjective objective = PlanObjective::kTime;
  std::vector<int> chunk_counts;
  std::vector<MemoryStrategy> strategies;
  std::vector<PlanTable> tables;  // one per token count, in the order given
  bool has_online = false;
  OnlineReplay online;
  bool has_fit = false;
  FitReport fit;
  std::string tool_version;
};

void write_plan_text(std::ostream& out, const PlanReport& report);
std::string plan_json(const PlanReport& report);

// The `# layout` line of `moesim simulate` and `moesim plan`, after its label: the layout, with
// tp > 1 duplicate token dropping and the global batch (of tokens_per_gpu; 0: several, left as
// B), then the gradient all-reduces and the ZeRO stage. Worth printing when tp > 1, grad_sync or
// zero_stage > 0 (layout_line_wanted).
std::string layout_text(const ParallelLayout& layout, bool drop_duplicate_tokens, bool grad_sync, int zero_stage,
                        std::int64_t tokens_per_gpu);
inline bool layout_line_wanted(int tp_size, bool grad_sync, int zero_stage) {
  return tp_size > 1 || grad_sync || zero_stage > 0;
}

// Shared number formats of the plan and sweep outputs: fixed decimals, so output is deterministic.
std::string format_fixed(double value, int decimals);
std::string format_ms(TimeNs t);    // "12.345" (3 decimals)
std::string format_gib(std::int64_t bytes);  // "12.34" (2 decimals)

}  // namespace moesim
