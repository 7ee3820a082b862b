// The layout planner of a whole training step (issue 23 item 9; `moesim plan --global-batch`):
// which tp x cp x pp (x vpp) layout, micro-batch, recomputation and ZeRO stage (and for an MoE
// model which ep, experts' tensor-parallel size and sub-stage pipelining) trains a model fastest
// on a cluster at a given global batch, and how many GPUs a token rate needs.
//
// 1. enumerate_layouts walks the candidates (below) and keeps those derive_step_shape accepts and
//    whose closed-form peak (model states + the stage's activations at the schedule's in-flight
//    peak, sim/memory) fits in the GPU less kStepMemoryReserve; every other candidate is counted
//    under its reason: the rule derive_step_shape (or the activation accounting) names, with its
//    numbers written N, or "does not fit".
// 2. plan_layouts estimates each fitting layout's step (step_estimate.h: the same cost models on a
//    sample of a few microbatches, timed for the real microbatches), ranks them by estimated tokens/s
//    per GPU, simulates the best 2K in full and ranks those by their simulated figures.
// 3. plan_for_token_rate walks whole node counts until the best layout's simulated rate reaches
//    a number of tokens a day.
//
// Candidates, for G GPUs with n per node (Megatron-LM's practice):
//   tp   divisors of n (tensor parallelism stays inside a node's NVLink domain);
//   cp   1, 2, 4, ... up to G / tp;
//   pp   divisors of G / (tp x cp) up to the layers;
//   vpp  1, and with the interleaved schedule (pp > 1) each v > 1 whose pp x v parts divide the
//        layers or layers + 2 (Megatron-Core's split that counts the embedding and the output layer
//        as one layer each, at least two units a part);
//   layers per part  even where the parts divide the layers, else balanced_part_layers
//        (sim/step/step_shape.h) where it leaves every part a layer (StepSpec::part_layers);
//   micro-batch  powers of two up to the per-replica batch global / dp;
//   recompute    none and full; selective (core_attn) too with unfused attention (with
//                FlashAttention it saves only the kernel's output and statistics for a second
//                run of the kernel); selective's other modules (--recompute-modules) are not tried;
//   sequence parallelism on whenever tp > 1: Megatron-LM recommends it with tensor parallelism
//                (the same communication volume, activations of the norms and dropouts / tp);
//   ZeRO LayoutRequest::zero_stages, by default kDefaultZeroStages: 0 and 1 (the distributed
//        optimizer); where the data-parallel group has one rank (every stage is ZeRO 0) only the
//        smallest requested stage;
//   ep   1 (dense models); every divisor of the experts (MoE models);
//   etp  the experts' tensor-parallel size (Megatron-Core's parallel folding, --etp): tp (the
//        unfolded layout) and, for MoE models, every other tp value (the folded layouts);
//   chunks  MoE sub-stage pipelining (--chunks): LayoutRequest::moe_chunks, by default
//        kDefaultMoeChunks for MoE models and 1 for dense ones;
//   memory reuse  LayoutRequest::moe_strategies (--strategies), by default none (MoE models);
//   schedule 1f1b, or interleaved with vpp > 1; LayoutRequest::schedules (--schedules) lists
//        others to try with vpp 1 and pp > 1 (gpipe, zb-h1, dualpipe, dualpipev: the step estimate
//        simulates the last three in full) and whether interleaved is tried;
//   combined 1F1B  with LayoutRequest::try_moe_ep_overlap, each MoE layout with pp 1 or vpp > 1,
//        ep > 1 and no full recomputation a second time with the MoE all-to-alls overlapped (its
//        closed-form peak counts one pass more);
//   rank order  with LayoutRequest::try_tp_pp_dp_mapping, each layout with pp > 1 (and its combined
//        1F1B twin) a second time in the order tp-cp-pp-dp, where the step accepts it.
// The step's own rules (derive_step_shape: --etp's, --chunks', ...) reject what they refuse.
// LayoutRequest::only fixes axes (tp, cp, pp, vpp, ep, etp, micro-batch) to the values it lists.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/search/step_estimate.h"
#include "sim/step/step_simulation.h"

namespace moesim::search {

// The sub-stage pipelining's chunk counts an MoE model's layouts try unless the request names
// others: whole, halves and quarters. docs/training-step.md's table (Qwen3-30B-A3B on 16 H100s,
// DeepSeek-V3 on 1,024) has its fastest step at 2 chunks, then 4; from 8 the experts' GEMMs are
// so small that the step is slower than unchunked. Each count multiplies the MoE candidates.
inline constexpr std::array<int, 3> kDefaultMoeChunks{1, 2, 4};

// The ZeRO stages tried unless the request names others: none and Megatron's distributed
// optimizer. 2 and 3 add per-microbatch reduce-scatters (and 3 the weights' all-gathers) to save
// memory, so they are tried on request (`plan --zero-stages 0-3`), where a layout would not fit.
inline constexpr std::array<int, 2> kDefaultZeroStages{0, 1};

// Axes a request fixes (`plan --global-batch --tp 2 --pp 8,16 ...`): each the values to try, in
// place of the planner's own list for that axis (empty: its own). check_fixed_axes refuses a value
// the planner never enumerates for the request (a pp that divides no GPUs / (tp x cp), ...), so
// that a restriction does not empty a plan silently.
struct LayoutAxes {
  std::vector<int> tp, cp, pp, vpp, ep, etp;
  std::vector<std::int64_t> micro_batch;
  // The recomputations to try in place of the planner's (none and full; selective too with
  // unfused attention); selective re-runs each of LayoutRequest::selective_sets.
  std::vector<Recompute> recompute;
};

struct LayoutRequest {
  ModelSpec model;
  ClusterSpec cluster;
  std::int64_t global_batch = 0;  // sequences per step
  std::int64_t seq = 0;           // 0: the model's seq_len
  AttentionKernel attention = AttentionKernel::kFlash;
  NetworkChoice network;
  std::vector<int> moe_chunks;  // the sub-stage pipelining's chunk counts to try; empty: the default above
  std::vector<int> zero_stages;  // the ZeRO stages to try (0-3); empty: kDefaultZeroStages
  // The MoE layers' memory-reuse strategies to try (StepSpec::moe_strategy); empty: none only.
  std::vector<MemoryStrategy> moe_strategies;
  // The pipeline schedules to try; empty: 1f1b with vpp 1 and interleaved with vpp > 1.
  std::vector<PipelineSchedule> schedules;
  // Whether each MoE layout without pipelining or with the interleaved schedule is also tried with
  // Megatron-Core's combined 1F1B (StepSpec::overlap_moe_ep_comm; `plan
  // --overlap-moe-expert-parallel-comm`).
  bool try_moe_ep_overlap = false;
  // Whether each layout with pp > 1 is also tried in Megatron-LM's rank order tp-cp-pp-dp
  // (StepSpec::tp_pp_dp_mapping; `plan --use-tp-pp-dp-mapping`), where the step accepts it.
  bool try_tp_pp_dp_mapping = false;
  // The MoE layers' routing for every layout (StepSpec::routing): uniform, or zipf (a matrix fixes
  // the expert-parallel size, which the planner varies: refused by plan_layouts).
  RoutingSpec routing;
  std::uint64_t seed = 1;
  std::optional<std::int64_t> host_launch_ns;  // StepSpec::host_launch_ns for every layout
  TokenDispatcher dispatcher = TokenDispatcher::kAllToAll;  // StepSpec::dispatcher for every layout
  LayoutAxes only;  // the axes the request fixes
  // What selective recomputation re-runs (--recompute-modules A/B/...): each set a candidate of its
  // own; empty: the default set (core_attn).
  std::vector<RecomputeModules> selective_sets;
  int top = 5;   // K: layouts reported; the best 2K by the estimate are simulated in full
  int jobs = 1;  // threads
};

// The request's ZeRO stages, sorted and unique (kDefaultZeroStages when it names none).
std::vector<int> zero_stages(const LayoutRequest& r);

struct LayoutCandidate {
  StepSpec spec;
  std::int64_t memory_estimate_bytes = 0;  // closed-form peak of the fullest stage
};

struct RejectionCount {
  std::string reason;
  std::int64_t count = 0;
};

struct LayoutEnumeration {
  std::int64_t considered = 0;
  std::vector<LayoutCandidate> fitting;      // in enumeration order
  std::vector<RejectionCount> rejections;    // most frequent first
};

// The closed-form peak memory of the step's fullest stage, per GPU. Throws InputError for a
// layout the activation accounting refuses.
std::int64_t closed_form_peak_bytes(const ModelSpec& model, const StepSpec& spec, const StepShape& shape);

// Throws InputError (naming --model) for a model without an architecture.
LayoutEnumeration enumerate_layouts(const LayoutRequest& request);

// Throws InputError naming the flag for a value of request.only that no candidate layout of the
// request has (with the other fixed axes; with several fixed and no candidate at all, naming them
// all), and naming --overlap-moe-expert-parallel-comm when the request tries the combined 1F1B but
// no candidate runs it. Not part of enumerate_layouts: the token-rate search plans node counts on
// which a fixed value may not exist yet.
void check_fixed_axes(const LayoutRequest& request);

struct PlannedLayout {
  LayoutCandidate candidate;
  StepEstimate estimate;
  std::optional<StepReport> simulated;  // for the best 2K by the estimate
};

struct LayoutPlan {
  LayoutEnumeration enumeration;
  std::vector<StepEstimate> estimates;   // of enumeration.fitting, index by index
  std::vector<PlannedLayout> simulated;  // ranked: fitting first, then by simulated tokens/s per GPU
};

// Progress: phase ("estimate" or "simulate"), done, total.
using PlanProgress = std::function<void(const char* phase, std::size_t done, std::size_t total)>;

LayoutPlan plan_layouts(const LayoutRequest& request, const PlanProgress& progress = {});

struct TokenRateStep {
  int nodes = 0;
  int gpus = 0;
  std::optional<PlannedLayout> best;  // the fastest fitting simulated layout
  double tokens_per_day = 0;          // of the whole cluster with it
  std::string note;                   // why there is none (no legal layout, none fits)
};

struct TokenRateSearch {
  double target_tokens_per_day = 0;
  int max_nodes = 0;
  std::vector<TokenRateStep> steps;  // 1 .. the answer's node count (or max_nodes)
  std::optional<std::size_t> answer; // index into steps
};

// Node counts 1, 2, ..., max_nodes of request.cluster's preset (with_gpus) until one reaches the
// target; the request's cluster is the preset.
TokenRateSearch plan_for_token_rate(const LayoutRequest& request, double tokens_per_day, int max_nodes,
                                    const PlanProgress& progress = {});

}  // namespace moesim::search
