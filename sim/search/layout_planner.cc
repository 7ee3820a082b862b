#include "sim/search/layout_planner.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

#include "sim/core/error.h"
#include "sim/memory/activations.h"
#include "sim/memory/model_states.h"
#include "sim/search/thread_pool.h"
#include "sim/step/step_shape.h"
#include "sim/spec/model_parameters.h"

namespace moesim::search {
namespace {

// Whether a value passes one of LayoutAxes' lists (an empty list passes every value).
template <typename T>
bool allowed(const std::vector<T>& only, T value) {
  return only.empty() || std::find(only.begin(), only.end(), value) != only.end();
}

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// 1, and with pp > 1 the interleaved schedule's chunks per stage v > 1 whose pp x v parts either
// divide the layers or split them as Megatron-Core's pipeline split that counts the embedding and
// the output layer as one layer each does (pp x v divides layers + 2, every part a layer or more;
// balanced_part_layers).
std::vector<int> virtual_stages(int layers, int pp) {
  std::vector<int> out{1};
  if (pp == 1) return out;
  for (int v = 2; std::int64_t{pp} * v <= layers; ++v) {
    const int parts = pp * v;
    if (layers % parts == 0 || ((layers + 2) % parts == 0 && (layers + 2) / parts >= 2)) out.push_back(v);
  }
  return out;
}

// The layers of each model part where the parts do not divide the model's (balanced_part_layers);
// left empty (an even split) where they do, or where no part of the balanced split may be empty,
// which derive_step_shape then rejects under its divisibility rule.
void set_part_layers(StepSpec& s, int layers) {
  // num_model_parts: pp x vpp, and the V's two arms of DualPipeV.
  const int parts = s.schedule == PipelineSchedule::kDualPipeV ? 2 * s.layout.pp : s.layout.pp * s.layout.vpp;
  if (layers % parts == 0 || (layers + 2) / parts < 2) return;
  s.part_layers = balanced_part_layers(layers, parts);
}

// Tensor-parallel degrees: the divisors of a node's GPUs that divide the cluster's.
std::vector<int> tensor_degrees(const ClusterSpec& cluster) {
  std::vector<int> out;
  for (int tp : divisors(cluster.node.gpus_per_node))
    if (cluster.num_gpus() % tp == 0) out.push_back(tp);
  return out;
}

// 1 for a dense model; every divisor of the experts for an MoE model (derive_step_shape rejects,
// under its rule, those the data-parallel ranks do not hold).
std::vector<int> expert_degrees(const ModelSpec& model) {
  return model.has_moe_layers() ? divisors(model.num_experts) : std::vector<int>{1};
}

// The experts' tensor-parallel sizes (StepLayout::etp) with tensor parallelism tp: 0 (etp = tp,
// the unfolded layout) first; for an MoE model then every other tensor-parallel degree, the folded
// layouts, which derive_step_shape rejects under its --etp rules where they do not fit the stage.
std::vector<int> expert_tensor_degrees(const LayoutRequest& r, int tp) {
  std::vector<int> out{0};
  if (!r.model.has_moe_layers()) return out;
  for (int etp : tensor_degrees(r.cluster))
    if (etp != tp) out.push_back(etp);
  return out;
}

// The sub-stage pipelining's chunk counts (StepSpec::moe_chunks), ascending and each once: the
// request's, or by default kDefaultMoeChunks for an MoE model and 1 for a dense one.
// `values` ascending and each once, or `fallback` when none are given.
template <typename T>
std::vector<T> sorted_or(std::vector<T> values, std::vector<T> fallback) {
  if (values.empty()) return fallback;
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::vector<int> moe_chunk_counts(const LayoutRequest& r) {
  return sorted_or(r.moe_chunks, r.model.has_moe_layers()
                                     ? std::vector<int>(kDefaultMoeChunks.begin(), kDefaultMoeChunks.end())
                                     : std::vector<int>{1});
}

std::vector<MemoryStrategy> moe_strategies(const LayoutRequest& r) {
  return sorted_or(r.moe_strategies, {MemoryStrategy::kNone});
}

std::vector<Recompute> recomputations(const LayoutRequest& r) {
  if (!r.only.recompute.empty()) return r.only.recompute;
  if (r.attention == AttentionKernel::kUnfused) return {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  return {Recompute::kNone, Recompute::kFull};
}

void add_batch_variants(const LayoutRequest& r, const StepLayout& layout, int chunks, MemoryStrategy strategy,
                        std::vector<StepSpec>& out) {
  // A global batch the data-parallel size does not divide still gets one candidate, which the
  // batch rule then rejects under its own name.
  const std::int64_t replica_batch = std::max<std::int64_t>(1, r.global_batch / layout.dp());
  for (std::int64_t mb = 1; mb <= replica_batch; mb *= 2) {
    if (!allowed(r.only.micro_batch, mb)) continue;
    for (Recompute recompute : recomputations(r)) {
      const std::vector<RecomputeModules> sets = recompute == Recompute::kSelective && !r.selective_sets.empty()
                                                     ? r.selective_sets
                                                     : std::vector<RecomputeModules>{RecomputeModules{}};
      const std::vector<int> zeros = zero_stages(r);
      for (const RecomputeModules& modules : sets)
        for (int zero : zeros) {
          // Nothing to shard over: every stage is ZeRO 0, tried once (as the smallest requested).
          if (zero != zeros.front() && layout.cp * layout.dp() == 1) continue;
          StepSpec s;
          s.layout = layout;
          s.global_batch = r.global_batch;
          s.micro_batch = mb;
          s.seq = r.seq;
          s.recompute = recompute;
          if (recompute == Recompute::kSelective) s.recompute_modules = modules;
          s.sequence_parallel = layout.tp > 1;
          s.attention = r.attention;
          s.zero_stage = zero;
          s.moe_chunks = chunks;
          s.moe_strategy = strategy;
          s.routing = r.routing;
          s.seed = r.seed;
          s.host_launch_ns = r.host_launch_ns;
          s.dispatcher = r.dispatcher;
          out.push_back(s);
        }
    }
  }
}

// The MoE layers' variants of one dense layout: ep, etp and the sub-stage pipelining's chunks.
void add_expert_variants(const LayoutRequest& r, StepLayout layout, std::vector<StepSpec>& out) {
  for (int ep : expert_degrees(r.model))
    for (int etp : expert_tensor_degrees(r, layout.tp))
      for (int chunks : moe_chunk_counts(r))
        for (MemoryStrategy strategy : moe_strategies(r)) {
          if (!allowed(r.only.ep, ep) || !allowed(r.only.etp, etp == 0 ? layout.tp : etp)) continue;
          layout.ep = ep;
          layout.etp = etp;
          add_batch_variants(r, layout, chunks, strategy, out);
        }
}

// The schedules a pp x vpp layout is tried with: unset (1f1b, or interleaved with vpp > 1) by
// default; with LayoutRequest::schedules, interleaved for vpp > 1 if listed, and for vpp 1 each
// other schedule listed (pp 1 has no pipeline: once, unset).
std::vector<std::optional<PipelineSchedule>> schedules_for(const LayoutRequest& r, int pp, int vpp) {
  if (r.schedules.empty() || pp == 1) return {std::nullopt};
  std::vector<std::optional<PipelineSchedule>> out;
  for (PipelineSchedule s : r.schedules)
    if ((s == PipelineSchedule::kInterleaved) == (vpp > 1)) out.push_back(s);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Each value of a fixed axis must be some candidate's: InputError naming the flag otherwise.
template <typename T, typename Of>
void check_axis(const char* flag, const std::vector<T>& only, const std::vector<StepSpec>& specs, bool alone, Of of,
                const char* rule) {
  for (T value : only) {
    const bool seen = std::any_of(specs.begin(), specs.end(), [&](const StepSpec& s) { return of(s) == value; });
    if (!seen)
      throw InputError(std::string(flag) + " " + std::to_string(value) + ": no candidate layout of this request has it" +
                       (alone ? "" : " with the other axes as given") + " (" + rule + ")");
  }
}

// "--tp 1,4 --pp 2": the fixed axes as flags.
std::string fixed_axes_text(const LayoutAxes& a) {
  std::string out;
  auto add = [&](const char* flag, const auto& values) {
    if (values.empty()) return;
    out += (out.empty() ? "" : " ") + std::string(flag) + " ";
    for (std::size_t k = 0; k < values.size(); ++k) out += (k ? "," : "") + std::to_string(values[k]);
  };
  add("--tp", a.tp);
  add("--cp", a.cp);
  add("--pp", a.pp);
  add("--vpp", a.vpp);
  add("--ep", a.ep);
  add("--etp", a.etp);
  add("--micro-batch", a.micro_batch);
  return out;
}

int fixed_count(const LayoutAxes& a) {
  return !a.tp.empty() + !a.cp.empty() + !a.pp.empty() + !a.vpp.empty() + !a.ep.empty() + !a.etp.empty() +
         !a.micro_batch.empty();
}

void check_axes_of(const LayoutRequest& r, const std::vector<StepSpec>& specs) {
  const LayoutAxes& a = r.only;
  const int fixed = fixed_count(a);
  // One axis alone: its own check below names its rule.
  if (specs.empty() && fixed > 1)
    throw InputError(fixed_axes_text(a) + ": no candidate layout of this request has these values together (tp: the "
                     "divisors of a node's GPUs that divide the cluster's; cp: powers of two; pp: the divisors of "
                     "GPUs / (tp x cp) up to the layers; vpp: docs/planning.md; ep: the divisors of the experts, 1 for "
                     "a dense model; etp: the tp values; micro-batch: powers of two)");
  check_axis("--tp", a.tp, specs, fixed == 1, [](const StepSpec& s) { return s.layout.tp; },
             "tp: the divisors of a node's GPUs that divide the cluster's");
  check_axis("--cp", a.cp, specs, fixed == 1, [](const StepSpec& s) { return s.layout.cp; },
             "cp: 1, 2, 4, ... up to GPUs / tp");
  check_axis("--pp", a.pp, specs, fixed == 1, [](const StepSpec& s) { return s.layout.pp; },
             "pp: the divisors of GPUs / (tp x cp) up to the layers");
  check_axis("--vpp", a.vpp, specs, fixed == 1, [](const StepSpec& s) { return s.layout.vpp; },
             "vpp > 1: pp x vpp parts that divide the layers, or the layers + 2 with two a part; the interleaved "
             "schedule, with pp > 1");
  check_axis("--ep", a.ep, specs, fixed == 1, [](const StepSpec& s) { return s.layout.ep; },
             "ep: the divisors of the experts; 1 for a dense model");
  check_axis("--etp", a.etp, specs, fixed == 1, [](const StepSpec& s) { return s.layout.expert_tp(); },
             "etp: the tp values; for a dense model tp");
  check_axis("--micro-batch", a.micro_batch, specs, fixed == 1, [](const StepSpec& s) { return s.micro_batch; },
             "micro-batch: powers of two up to the global batch / the data-parallel size");
}

// Megatron-Core's combined 1F1B (StepSpec::overlap_moe_ep_comm) is tried beside each MoE layout it
// runs on, where the request asks: without pipelining or with the interleaved schedule, with
// expert parallelism, without full recomputation and below ZeRO 3 (check_moe_ep_overlap's rules).
bool combined_1f1b_applies(const LayoutRequest& r, const StepSpec& s) {
  return r.try_moe_ep_overlap && r.model.has_moe_layers() && r.model.architecture.mtp_depth <= 1 &&
         (s.layout.pp == 1 || s.layout.vpp > 1) && s.layout.ep > 1 && s.recompute != Recompute::kFull &&
         s.zero_stage < 3;
}

// Whether the step's rules accept the layout: a twin of one they reject would be rejected by the
// same rule, counted twice.
bool step_accepts(const LayoutRequest& r, const StepSpec& s) {
  try {
    derive_step_shape(r.model, r.cluster, s);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// Each candidate from `from` on, with pp > 1, again in the rank order tp-cp-pp-dp where the
// request asks and the step accepts it (StepSpec::tp_pp_dp_mapping).
void add_rank_order_twins(const LayoutRequest& r, std::size_t from, std::vector<StepSpec>& out) {
  if (!r.try_tp_pp_dp_mapping) return;
  const std::size_t to = out.size();
  for (std::size_t k = from; k < to; ++k) {
    if (out[k].layout.pp == 1) continue;
    StepSpec twin = out[k];
    twin.tp_pp_dp_mapping = true;
    if (step_accepts(r, twin)) out.push_back(std::move(twin));
  }
}

std::vector<StepSpec> candidate_specs(const LayoutRequest& r) {
  const int gpus = r.cluster.num_gpus();
  const int layers = r.model.num_layers;
  std::vector<StepSpec> out;
  for (int tp : tensor_degrees(r.cluster)) {
    if (!allowed(r.only.tp, tp)) continue;
    for (int cp = 1; gpus % (tp * cp) == 0; cp *= 2) {
      for (int pp : divisors(gpus / (tp * cp))) {
        if (pp > layers) break;
        if (!allowed(r.only.cp, cp) || !allowed(r.only.pp, pp)) continue;
        for (int vpp : virtual_stages(layers, pp))
          for (const std::optional<PipelineSchedule>& schedule : schedules_for(r, pp, vpp)) {
            if (!allowed(r.only.vpp, vpp)) continue;
            const std::size_t from = out.size();
            add_expert_variants(r, StepLayout{gpus, tp, pp, vpp, 1, cp}, out);
            const std::size_t to = out.size();
            for (std::size_t k = from; k < to; ++k) {
              out[k].schedule = schedule;
              set_part_layers(out[k], layers);
              if (!combined_1f1b_applies(r, out[k]) || !step_accepts(r, out[k])) continue;
              StepSpec combined = out[k];
              combined.overlap_moe_ep_comm = true;
              out.push_back(std::move(combined));
            }
            add_rank_order_twins(r, from, out);
          }
      }
      if (tp * cp == gpus) break;
    }
  }
  return out;
}

// A rule with its numbers written N, so that the candidates one rule rejects count together; the
// model's name (GPT-1.7B) and the schedule zb-h1 keep their digits.
std::string rule_of(const std::string& message, const std::string& model_name) {
  std::string out;
  for (std::size_t i = 0; i < message.size();) {
    std::string kept;
    for (const std::string& word : {model_name, std::string("zb-h1")})
      if (!word.empty() && message.compare(i, word.size(), word) == 0) kept = word;
    if (!kept.empty()) {
      out += kept;
      i += kept.size();
    } else if (std::isdigit(static_cast<unsigned char>(message[i]))) {
      out += 'N';
      while (i < message.size() && std::isdigit(static_cast<unsigned char>(message[i]))) ++i;
    } else {
      out += message[i++];
    }
  }
  return out;
}

constexpr const char* kDoesNotFit =
    "does not fit: closed-form peak (model states + stage activations) above the GPU's memory less the 2 GiB reserve";

}  // namespace

namespace {

// ZeRO 2-3's transient whole tensors on a stage (docs/training-step.md, ZeRO): two layers' whole
// fp32 gradients (the layer in backward and the one whose reduce-scatter runs), the whole
// gradients of what the layers do not hold (embedding, head, final norm), and with 3 two layers'
// gathered weights (the layer in use and the one prefetched). An approximation of the simulated
// peak, which holds every layer whose reduce-scatter still waits.
std::int64_t zero_transient_bytes(const ModelSpec& model, const StepShape& shape, int zero,
                                  const std::vector<int>& layers, const StageModelStates& st) {
  if (zero < 2) return 0;
  const StepLayout& l = shape.layout;
  std::int64_t largest = 0, in_layers = 0;
  for (int layer : layers) {
    const LocalLayerParameters p = local_layer_parameters(layer_parameters(model, layer), l.tp, l.ep, l.expert_tp());
    largest = std::max(largest, p.dense + p.expert);
    in_layers += p.dense + p.expert;
  }
  const auto rest = std::max<std::int64_t>(0, static_cast<std::int64_t>(st.dense_params + st.expert_params) - in_layers);
  std::int64_t bytes = 4 * (2 * largest + rest);
  if (zero >= 3) bytes += 2 * largest * shape.element_bytes;
  return bytes;
}

}  // namespace

void check_fixed_axes(const LayoutRequest& r) {
  if (fixed_count(r.only) == 0 && !r.try_moe_ep_overlap && !r.try_tp_pp_dp_mapping) return;
  const std::vector<StepSpec> specs = candidate_specs(r);
  if (fixed_count(r.only) > 0) check_axes_of(r, specs);
  if (r.try_moe_ep_overlap &&
      std::none_of(specs.begin(), specs.end(), [](const StepSpec& s) { return s.overlap_moe_ep_comm; }))
    throw InputError("--overlap-moe-expert-parallel-comm: no candidate layout of this request runs Megatron-Core's "
                     "combined 1F1B (it needs --pp 1 or --vpp > 1, --ep > 1, no full recomputation, ZeRO below 3, at "
                     "most one multi-token prediction module, and a layout the step accepts)");
  if (r.try_tp_pp_dp_mapping &&
      std::none_of(specs.begin(), specs.end(), [](const StepSpec& s) { return s.tp_pp_dp_mapping; }))
    throw InputError("--use-tp-pp-dp-mapping: no candidate layout of this request runs in the rank order tp-cp-pp-dp "
                     "(it needs --pp > 1 and, with MoE layers, --etp x --ep = --tp x --cp)");
}

std::vector<int> zero_stages(const LayoutRequest& r) {
  return sorted_or(r.zero_stages, std::vector<int>(kDefaultZeroStages.begin(), kDefaultZeroStages.end()));
}

namespace {

// MoE memory reuse (--strategy s1-s4): what the backward restores at once on top of the kept
// activations (sim/step/moe_mlp_reuse.cc): one chunk's T_DI and T_M in a whole backward; in a
// split backward's weight pass every chunk's T_DI and activation output.
std::int64_t restore_transient_bytes(const ModelSpec& model, const StepSpec& spec, const StepShape& shape,
                                     const ActivationLayout& act) {
  if (spec.moe_strategy == MemoryStrategy::kNone || !model.has_moe_layers()) return 0;
  const MoeReusedTensors t = moe_reused_tensors(model, act);
  const bool split = shape.schedule == PipelineSchedule::kZeroBubbleH1 || shape.schedule == PipelineSchedule::kDualPipe ||
                     shape.schedule == PipelineSchedule::kDualPipeV;
  const std::int64_t chunk = (t.t_di + t.t_m + spec.moe_chunks - 1) / spec.moe_chunks;
  return split ? std::max(chunk, t.t_di + t.t_m_activation) : chunk;
}

}  // namespace

std::int64_t closed_form_peak_bytes(const ModelSpec& model, const StepSpec& spec, const StepShape& shape) {
  const StepLayout& l = shape.layout;
  const ActivationLayout act = activation_layout(shape, spec);
  // The same model-state layout the step builder gives its stages (sim/step/step_shape.h).
  const std::vector<std::vector<int>> layers = stage_layers(shape);
  const auto states = model_states_per_gpu(model, states_layout(shape, spec.zero_stage), layers);
  PipelineLayout pipe{shape.schedule, l.pp, l.vpp, shape.pipeline.microbatches, {}, spec.overlap_moe_ep_comm};
  for (const StepShape::Part& p : shape.parts) pipe.part_layers.push_back(p.layers);
  std::int64_t peak = 0;
  const std::int64_t restored = restore_transient_bytes(model, spec, shape, act);
  for (int s = 0; s < l.pp; ++s) {
    const StageModelStates& st = states[static_cast<std::size_t>(s)];
    const std::int64_t bytes = static_cast<std::int64_t>(st.weight_bytes) + static_cast<std::int64_t>(st.grad_bytes) +
                               static_cast<std::int64_t>(st.optimizer_bytes) +
                               stage_activations(model, act, l.ep, pipe, s).bytes() +
                               zero_transient_bytes(model, shape, spec.zero_stage, layers[static_cast<std::size_t>(s)], st) +
                               restored;
    peak = std::max(peak, bytes);
  }
  return peak;
}

LayoutEnumeration enumerate_layouts(const LayoutRequest& r) {
  require_architecture(r.model);
  if (r.routing.kind == RoutingKind::kMatrix)
    throw InputError("--routing " + r.routing.to_string() + ": a routing matrix fixes the expert-parallel size, which the "
                     "layout plan varies; plan with uniform or zipf:<s>, or simulate one layout with simulate --global-batch");
  check_step_routing(r.model, r.routing);  // every candidate would be refused for it
  for (MemoryStrategy s : r.moe_strategies)
    if (s != MemoryStrategy::kNone && !r.model.has_moe_layers())
      throw InputError("--strategies: memory reuse (" + std::string(to_string(s)) + ") reuses the MoE layers' buffers; " +
                       r.model.name + " has no MoE layer");
  LayoutEnumeration out;
  std::map<std::string, std::int64_t> rejected;
  const std::int64_t usable = r.cluster.node.gpu.hbm_capacity_bytes - kStepMemoryReserve;
  for (const StepSpec& spec : candidate_specs(r)) {
    ++out.considered;
    try {
      const StepShape shape = derive_step_shape(r.model, r.cluster, spec);
      const std::int64_t bytes = closed_form_peak_bytes(r.model, spec, shape);
      if (bytes > usable) {
        ++rejected[kDoesNotFit];
        continue;
      }
      out.fitting.push_back(LayoutCandidate{spec, bytes});
    } catch (const InputError& e) {
      ++rejected[rule_of(e.rule(), r.model.name)];
    }
  }
  for (const auto& [reason, count] : rejected) out.rejections.push_back({reason, count});
  std::stable_sort(out.rejections.begin(), out.rejections.end(),
                   [](const RejectionCount& a, const RejectionCount& b) { return a.count > b.count; });
  return out;
}

LayoutPlan plan_layouts(const LayoutRequest& r, const PlanProgress& progress) {
  LayoutPlan plan;
  plan.enumeration = enumerate_layouts(r);
  const std::vector<LayoutCandidate>& fitting = plan.enumeration.fitting;
  std::vector<StepEstimate>& estimates = plan.estimates;
  estimates.resize(fitting.size());
  parallel_for(
      fitting.size(), r.jobs,
      [&](std::size_t i) { estimates[i] = estimate_training_step(r.model, r.cluster, fitting[i].spec, r.network); },
      [&](std::size_t done) {
        if (progress) progress("estimate", done, fitting.size());
      });
  std::vector<std::size_t> order(fitting.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Faster first; of equal rates the smaller peak (more room), then enumeration order.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (estimates[a].step_ns != estimates[b].step_ns) return estimates[a].step_ns < estimates[b].step_ns;
    return fitting[a].memory_estimate_bytes < fitting[b].memory_estimate_bytes;
  });
  const std::size_t simulated = std::min(order.size(), static_cast<std::size_t>(2 * std::max(r.top, 1)));
  plan.simulated.resize(simulated);
  parallel_for(
      simulated, r.jobs,
      [&](std::size_t k) {
        const std::size_t i = order[k];
        plan.simulated[k] = PlannedLayout{fitting[i], estimates[i],
                                          simulate_training_step(r.model, r.cluster, fitting[i].spec, r.network).report};
      },
      [&](std::size_t done) {
        if (progress) progress("simulate", done, simulated);
      });
  std::stable_sort(plan.simulated.begin(), plan.simulated.end(), [](const PlannedLayout& a, const PlannedLayout& b) {
    const StepReport& x = *a.simulated;
    const StepReport& y = *b.simulated;
    if (x.fits != y.fits) return x.fits;
    if (x.step_ns != y.step_ns) return x.step_ns < y.step_ns;
    return x.peak_memory_bytes < y.peak_memory_bytes;
  });
  return plan;
}

TokenRateSearch plan_for_token_rate(const LayoutRequest& request, double tokens_per_day, int max_nodes,
                                    const PlanProgress& progress) {
  TokenRateSearch search;
  search.target_tokens_per_day = tokens_per_day;
  search.max_nodes = max_nodes;
  const int per_node = request.cluster.node.gpus_per_node;
  for (int nodes = 1; nodes <= max_nodes; ++nodes) {
    TokenRateStep step;
    step.nodes = nodes;
    step.gpus = nodes * per_node;
    LayoutRequest r = request;
    r.cluster = with_gpus(request.cluster, step.gpus, SourceLocation{}, "--max-nodes");
    const LayoutPlan plan = plan_layouts(r, progress);
    if (!plan.simulated.empty() && plan.simulated.front().simulated->fits) {
      step.best = plan.simulated.front();
      step.tokens_per_day = step.best->simulated->tokens_per_s_per_gpu * step.gpus * 86400.0;
    } else {
      const auto& rejections = plan.enumeration.rejections;
      step.note = !plan.enumeration.fitting.empty() ? "none of the simulated layouts fits"
                  : rejections.empty()              ? "no candidate layout"
                                                    : "no layout fits; most often: " + rejections.front().reason;
    }
    search.steps.push_back(step);
    if (step.best && step.tokens_per_day >= tokens_per_day) {
      search.answer = search.steps.size() - 1;
      break;
    }
  }
  return search;
}

}  // namespace moesim::search
