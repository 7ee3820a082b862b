#include "sim/step/step_shape.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "sim/core/error.h"
#include "sim/spec/model_parameters.h"
#include "sim/spec/run_spec.h"
#include "sim/step/moe_mlp.h"

namespace moesim {
namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

void require(bool ok, const std::string& rule) {
  if (!ok) throw InputError(rule);
}

void check_degrees(const StepLayout& l, const ClusterSpec& cluster) {
  for (auto [flag, v] : {std::pair{"--tp", l.tp}, {"--pp", l.pp}, {"--vpp", l.vpp}, {"--ep", l.ep}, {"--cp", l.cp},
                         {"--etp", l.expert_tp()}})
    require(v >= 1 && v <= kMaxGroupSize, std::string(flag) + " " + str(v) + " must be in [1, " + str(kMaxGroupSize) + "]");
  require(l.gpus == cluster.num_gpus(), "the layout's GPU count " + str(l.gpus) + " differs from the cluster's " +
                                            str(cluster.num_gpus()));
  const std::int64_t model_parallel = std::int64_t{l.tp} * l.cp * l.pp;
  require(l.gpus % model_parallel == 0, "--gpus " + str(l.gpus) + " is not a multiple of --tp x --cp x --pp = " +
                                            str(model_parallel));
  require(l.vpp == 1 || l.pp > 1, "--vpp " + str(l.vpp) + " needs --pp > 1 (virtual stages split a pipeline stage)");
}

// The MoE layers' own layout (etp != tp), as Megatron-Core's initialize_model_parallel and
// MoELayer require it: etp x ep x pp divides the world (etp x ep divides a stage's tp x cp x dp),
// the experts' columns split over etp, and sequence parallelism with tensor parallelism (MoELayer
// refuses tensor parallelism without it in training).
void check_folded_experts(const ModelSpec& model, const StepLayout& l, bool sequence_parallel) {
  const int etp = l.expert_tp();
  require(model.d_ffn % etp == 0, "--etp " + str(etp) + " does not divide the experts' d_ffn " + str(model.d_ffn) +
                                      " of " + model.name + " (their columns are split over the etp ranks)");
  const std::int64_t expert_ranks = std::int64_t{etp} * l.ep;
  require(l.stage_size() % expert_ranks == 0,
          "--etp x --ep = " + str(expert_ranks) + " does not divide the " + str(l.stage_size()) +
              " ranks of a pipeline stage (--tp x --cp x data-parallel size; the experts' layout etp x ep x "
              "expert data-parallel fills them)");
  require(l.tp == 1 || sequence_parallel, "--etp " + str(etp) + " with --tp " + str(l.tp) +
                                              " needs --sequence-parallel (Megatron-Core's MoE layer refuses tensor "
                                              "parallelism without it in training)");
}

void check_model_split(const ModelSpec& model, const StepLayout& l, bool sequence_parallel) {
  const AttentionSpec& a = model.architecture.attention;
  require(a.num_heads % l.tp == 0, "--tp " + str(l.tp) + " does not divide the " + str(a.num_heads) +
                                       " attention heads of " + model.name);
  if (a.kind != AttentionKind::kMla)
    require(a.num_kv_heads % l.tp == 0, "--tp " + str(l.tp) + " does not divide the " + str(a.num_kv_heads) +
                                            " key/value groups of " + model.name);
  require(!sequence_parallel || l.tp > 1, "--sequence-parallel needs --tp > 1 (it splits the tensor-parallel "
                                          "region's norms and dropouts over the tensor-parallel ranks)");
  if (!model.has_moe_layers()) {
    require(l.ep == 1, "--ep " + str(l.ep) + " needs a model with MoE layers; " + model.name + " has none");
    require(!l.folded(), "--etp " + str(l.expert_tp()) + " needs a model with MoE layers; " + model.name + " has none");
  } else {
    require(model.num_experts % l.ep == 0, "--ep " + str(l.ep) + " does not divide the " + str(model.num_experts) +
                                               " experts of " + model.name);
    if (l.folded()) {
      check_folded_experts(model, l, sequence_parallel);
    } else {
      const std::int64_t cp_dp = std::int64_t{l.cp} * l.dp();
      require(cp_dp % l.ep == 0, "--ep " + str(l.ep) + " does not divide --cp x data-parallel size = " + str(cp_dp) +
                                     " (the expert-parallel group lies inside them)");
    }
  }
}

}  // namespace

std::vector<int> balanced_part_layers(int layers, int parts) {
  require(parts >= 1 && layers >= 1, "--pp x --vpp = " + str(parts) + " parts of " + str(layers) +
                                         " layers: both must be at least 1");
  if (parts == 1) return {layers};
  const int units = layers + 2;  // the embedding and the output layer count as one layer each
  const int base = units / parts;
  require(base >= 2, "--pp x --vpp = " + str(parts) + " parts leave the end parts no transformer layer of the " +
                         str(layers) + " (with the embedding and the output layer counted as one each)");
  std::vector<int> out(static_cast<std::size_t>(parts), base);
  // units % parts parts take a unit more; the others, the ends first (part 0, the last part,
  // part 1, the last but one, ...), do not.
  for (int& n : out) ++n;
  for (int k = 0; k < parts - units % parts; ++k) {
    const int part = k % 2 == 0 ? k / 2 : parts - 1 - k / 2;
    out[static_cast<std::size_t>(part)] = base;
  }
  --out.front();
  --out.back();
  return out;
}

namespace {

// `label` names where the part count comes from: "--pp x --vpp", or DualPipeV's "2 x --pp".
std::vector<StepShape::Part> split_layers(const ModelSpec& model, int parts, const std::vector<int>& given,
                                          const std::string& label) {
  std::vector<StepShape::Part> out(static_cast<std::size_t>(parts));
  if (given.empty()) {
    require(model.num_layers % parts == 0, label + " = " + str(parts) + " does not divide the " +
                                               str(model.num_layers) + " layers of " + model.name +
                                               " (give the layers of each part with --part-layers)");
    const int per_part = model.num_layers / parts;
    for (int p = 0; p < parts; ++p) out[static_cast<std::size_t>(p)] = {p * per_part, per_part};
    return out;
  }
  require(static_cast<int>(given.size()) == parts, "--part-layers lists " + str(static_cast<std::int64_t>(given.size())) +
                                                       " parts; " + label + " = " + str(parts));
  std::int64_t first = 0;
  for (int p = 0; p < parts; ++p) {
    const int n = given[static_cast<std::size_t>(p)];
    require(n >= 0 && n <= model.num_layers, "--part-layers: part " + str(p) + " has " + str(n) +
                                                 " layers, outside [0, " + str(model.num_layers) + "]");
    out[static_cast<std::size_t>(p)] = {static_cast<int>(first), n};
    first += n;
  }
  require(first == model.num_layers, "--part-layers sums to " + str(first) + " layers; " + model.name + " has " +
                                         str(model.num_layers));
  return out;
}

void check_batch(const StepSpec& spec, const StepShape& shape) {
  require(spec.micro_batch >= 1 && spec.micro_batch <= kMaxTokensPerGpu,
          "--micro-batch " + str(spec.micro_batch) + " must be in [1, " + str(kMaxTokensPerGpu) + "]");
  require(spec.global_batch >= 1 && spec.global_batch <= kMaxTokensPerGpu,
          "--global-batch " + str(spec.global_batch) + " must be in [1, " + str(kMaxTokensPerGpu) + "]");
  const std::int64_t per_step = spec.micro_batch * shape.dp;
  require(spec.global_batch % per_step == 0, "--global-batch " + str(spec.global_batch) +
                                                 " is not divisible by --micro-batch x data-parallel size = " +
                                                 str(spec.micro_batch) + " x " + str(shape.dp));
  require(shape.seq >= 1 && shape.seq <= kMaxTokensPerGpu,
          "--seq " + str(shape.seq) + " must be in [1, " + str(kMaxTokensPerGpu) + "]");
  const int cp = shape.layout.cp;
  require(cp == 1 || shape.seq % (2 * cp) == 0,
          "--seq " + str(shape.seq) + " is not divisible by 2 x --cp = " + str(2 * cp) +
              " (context parallelism cuts each sequence into 2 x cp chunks to balance the causal mask)");
  require(spec.micro_batch * shape.seq / cp <= kMaxTokensPerGpu, "--micro-batch x --seq / --cp exceeds " +
                                                                     str(kMaxTokensPerGpu) + " tokens");
}

DType step_gemm_dtype(const ModelSpec& model, const ClusterSpec& cluster, DType precision) {
  if (precision == DType::kFp8) {
    require(cluster.node.gpu.peak_flops.count(DType::kFp8) != 0,
            "--precision fp8: the " + cluster.node.gpu.name + " has no fp8 peak (no FP8 tensor cores)");
    require(model.dtype == DType::kBf16 || model.dtype == DType::kFp16,
            "--precision fp8 needs a model stored in bf16 or fp16; " + model.name + " is " +
                std::string(to_string(model.dtype)));
    return DType::kFp8;
  }
  require(precision == DType::kBf16, "--precision must be bf16 or fp8");
  // bf16 asks for the model's own GEMM math (fp16 models multiply in fp16).
  return model.gemm_dtype;
}

}  // namespace

StepShape derive_step_shape(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec) {
  require_architecture(model);
  StepShape shape;
  shape.layout = spec.layout;
  shape.gpus_per_node = cluster.node.gpus_per_node;
  check_degrees(spec.layout, cluster);
  check_rank_order(model, spec);
  shape.pp_before_dp = spec.tp_pp_dp_mapping;
  shape.dp = spec.layout.dp();
  check_model_split(model, spec.layout, spec.sequence_parallel);
  require(spec.zero_stage >= 0 && spec.zero_stage <= 3, "--zero " + str(spec.zero_stage) + " must be 0, 1, 2 or 3");
  shape.seq = spec.seq > 0 ? spec.seq : model.architecture.seq_len;
  require(spec.seq >= 0, "--seq " + str(spec.seq) + " must be positive");
  check_batch(spec, shape);
  shape.micro_batch = spec.micro_batch;
  shape.global_batch = spec.global_batch;
  shape.schedule = spec.effective_schedule();
  const std::int64_t microbatches = spec.global_batch / (spec.micro_batch * shape.dp);
  require(microbatches <= kMaxChunks, "--global-batch / (--micro-batch x data-parallel size) = " + str(microbatches) +
                                          " microbatches exceeds " + str(kMaxChunks));
  shape.pipeline = PipelineShape{spec.layout.pp, spec.layout.vpp, static_cast<int>(microbatches)};
  const std::string problem = schedule_problem(shape.schedule, shape.pipeline);
  require(problem.empty(), "--schedule " + std::string(to_string(shape.schedule)) + ": " + problem);
  shape.parts = split_layers(model, num_model_parts(shape.schedule, shape.pipeline), spec.part_layers,
                             shape.schedule == PipelineSchedule::kDualPipeV ? "2 x --pp (dualpipev's V)" : "--pp x --vpp");
  shape.gemm_dtype = step_gemm_dtype(model, cluster, spec.gemm_precision);
  shape.storage_dtype = model.dtype;
  shape.fp8_recipe = spec.fp8_recipe;
  shape.element_bytes = model.element_bytes();
  check_moe_chunks(model, shape, spec.moe_chunks, spec.sequence_parallel);
  check_step_routing(model, spec.routing);
  check_dispatcher(model, shape, spec);
  check_moe_strategy(model, spec);
  check_recompute_modules(model, spec);
  check_dualpipe_zero(shape, spec);
  check_moe_ep_overlap(model, shape, spec);
  return shape;
}

void check_rank_order(const ModelSpec& model, const StepSpec& spec) {
  const StepLayout& l = spec.layout;
  if (!spec.tp_pp_dp_mapping || !model.has_moe_layers() || l.pp == 1) return;
  // Megatron-Core requires the dense and the expert rank generators to give the same pipeline
  // groups; in the order tp-cp-pp-dp and the experts' tp-ep-pp-dp the stages lie tp x cp and
  // etp x ep ranks apart (without pipelining every group is one rank, and the order changes nothing).
  require(l.expert_tp() * l.ep == l.tp * l.cp,
          "--use-tp-pp-dp-mapping with MoE layers and --pp > 1 needs --etp x --ep = --tp x --cp (the experts' "
          "pipeline stages must be the dense layers'), got " + str(l.expert_tp()) + " x " + str(l.ep) + " = " +
              str(l.expert_tp() * l.ep) + " against " + str(l.tp) + " x " + str(l.cp) + " = " + str(l.tp * l.cp));
}

void check_dualpipe_zero(const StepShape& shape, const StepSpec& spec) {
  // Each stage's per-layer weight all-gathers would run over both mirror stages' shards: not modelled.
  require(shape.schedule != PipelineSchedule::kDualPipe || spec.zero_stage != 3,
          "--schedule dualpipe with --zero 3: ZeRO-3's per-layer weight gathers over the two copies of each model "
          "part are not modelled; use --zero 0, 1 or 2");
  // The gathers inside the overlapped F&B pairs, as in the combined 1F1B's: not modelled.
  require(shape.schedule != PipelineSchedule::kDualPipeV || spec.zero_stage != 3,
          "--schedule dualpipev with --zero 3: ZeRO-3's per-layer weight gathers inside the overlapped forward and "
          "backward pairs are not modelled; use --zero 0, 1 or 2");
}

std::vector<std::vector<PipeAction>> step_programs(const StepShape& shape, const StepSpec& spec) {
  return spec.overlap_moe_ep_comm ? combined_1f1b_programs(shape.schedule, shape.pipeline)
                                  : stage_programs(shape.schedule, shape.pipeline);
}

void check_moe_ep_overlap(const ModelSpec& model, const StepShape& shape, const StepSpec& spec) {
  if (!spec.overlap_moe_ep_comm) return;
  const std::string flag = "--overlap-moe-expert-parallel-comm";
  require(model.has_moe_layers(), flag + " overlaps the MoE layers' all-to-alls; " + model.name + " has none");
  require(shape.schedule == PipelineSchedule::kInterleaved ||
              (shape.schedule == PipelineSchedule::kOneFOneB && shape.pipeline.stages == 1),
          flag + " with --schedule " + std::string(to_string(shape.schedule)) + " and --pp " +
              std::to_string(shape.pipeline.stages) +
              ": Megatron-Core's combined 1F1B runs without pipelining (--pp 1) or with the interleaved schedule "
              "(--vpp > 1)");
  // Megatron-Core's TransformerConfig refuses the rest: nothing to overlap without expert
  // parallelism, and a whole layer's checkpoint hides the passes' parts the schedule interleaves.
  require(shape.layout.ep > 1, flag + " with --ep 1: there is no expert-parallel all-to-all to overlap");
  require(spec.recompute != Recompute::kFull,
          flag + " with --recompute full: Megatron-Core refuses it (a whole layer's checkpoint cannot be interleaved); "
                 "use none or selective");
  require(model.architecture.mtp_depth <= 1, flag + " with " + std::to_string(model.architecture.mtp_depth) +
                                                 " multi-token prediction modules: Megatron-Core supports one");
  // As with DualPipe's pairs: the interleaved pair's order on the gradient stream against ZeRO-3's
  // prefetched weight gathers is not modelled (the two deadlock in the simulation).
  require(spec.zero_stage < 3, flag + " with --zero 3: ZeRO-3's per-layer weight gathers inside the interleaved "
                                      "pairs are not modelled; use --zero 0, 1 or 2");
}

void check_recompute_modules(const ModelSpec& model, const StepSpec& spec) {
  if (spec.recompute != Recompute::kSelective) return;
  const RecomputeModules& m = spec.recompute_modules;
  require(!m.moe_act || model.has_moe_layers(),
          "--recompute-modules moe_act re-runs the routed experts' activation; " + model.name + " has no MoE layer");
  bool dense_layers = false;
  for (int l = 0; l < model.num_layers && !dense_layers; ++l) dense_layers = !is_moe_layer(model, l);
  require(!m.mlp || dense_layers,
          "--recompute-modules mlp re-runs the dense layers' MLPs; " + model.name +
              " has none (an MoE layer's MLP is the module moe)");
  require(!m.moe || model.has_moe_layers(),
          "--recompute-modules moe re-runs the MoE layers' MLPs; " + model.name + " has no MoE layer");
  require(!m.shared_experts || (model.has_moe_layers() && model.shared_experts.count > 0),
          "--recompute-modules shared_experts re-runs the shared experts; " + model.name + " has none");
  require(!m.mla_up_proj || model.architecture.attention.kind == AttentionKind::kMla,
          "--recompute-modules mla_up_proj re-runs multi-latent attention's up projections; " + model.name +
              " has no MLA attention");
  require(!m.layernorm || recomputable_norms(model, model.has_moe_layers()) > 0,
          "--recompute-modules layernorm drops nothing for " + model.name +
              ": Transformer Engine fuses each of its norms into the linear layer after it, which keeps the "
              "norm's output (only MLA's input norm and an MoE layer's pre-MLP norm are modules of their own)");
}

void check_moe_strategy(const ModelSpec& model, const StepSpec& spec) {
  if (spec.moe_strategy == MemoryStrategy::kNone) return;
  const std::string flag = "--strategy " + std::string(to_string(spec.moe_strategy));
  require(model.has_moe_layers(), flag + " reuses the MoE layers' buffers; " + model.name + " has none");
  require(spec.recompute != Recompute::kFull,
          flag + " restores the experts' tensors that --recompute full already recomputes: give one of them");
}

void check_step_routing(const ModelSpec& model, const RoutingSpec& routing) {
  require(routing.balanced() || model.has_moe_layers(),
          "--routing " + routing.to_string() + " spreads tokens over experts; " + model.name + " has no MoE layer");
}

ActivationLayout activation_layout(const StepShape& shape, const StepSpec& spec) {
  ActivationLayout a;
  a.micro_batch = shape.micro_batch;
  a.seq = shape.seq;
  a.tp = shape.layout.tp;
  a.cp = shape.layout.cp;
  a.etp = shape.layout.expert_tp();
  a.sequence_parallel = spec.sequence_parallel;
  a.recompute = spec.recompute;
  a.modules = spec.recompute_modules;
  a.attention = spec.attention;
  a.moe_strategy = spec.moe_strategy;
  return a;
}

TrainingLayout states_layout(const StepShape& shape, int zero_stage) {
  TrainingLayout t;
  t.tp = shape.layout.tp;
  t.pp = shape.layout.pp;
  t.ep = shape.layout.ep;
  t.etp = shape.layout.expert_tp();
  t.dp = shape.layout.edp();
  t.zero_stage = zero_stage;
  // DualPipe: every part's parameters have twice the replicas (ZeRO shards over all of them).
  t.dp *= static_cast<int>(shape.replica_stages(0).size());
  t.ends_on_both_end_stages = shape.schedule == PipelineSchedule::kDualPipe;
  t.head_on_first_stage = shape.schedule == PipelineSchedule::kDualPipeV;
  return t;
}

std::vector<std::vector<int>> stage_layers(const StepShape& shape) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(shape.stages()));
  for (int s = 0; s < shape.stages(); ++s)
    for (int c = 0; c < chunks_per_stage(shape.schedule, shape.pipeline); ++c) {
      const StepShape::Part& p = shape.parts[static_cast<std::size_t>(model_part(shape.schedule, shape.pipeline, s, c))];
      for (int l = p.first_layer; l < p.first_layer + p.layers; ++l) out[static_cast<std::size_t>(s)].push_back(l);
    }
  return out;
}

std::vector<int> StepShape::tensor_group(int stage) const {
  std::vector<int> out;
  for (int t = 0; t < layout.tp; ++t) out.push_back(stage_rank(stage) + t);
  return out;
}

std::vector<int> StepShape::context_group(int stage) const {
  std::vector<int> out;
  for (int c = 0; c < layout.cp; ++c) out.push_back(stage_rank(stage) + c * layout.tp);
  return out;
}

std::vector<int> StepShape::stage_group(int stage) const {
  std::vector<int> out;
  for (int d = 0; d < dp; ++d)
    for (int r = 0; r < layout.tp * layout.cp; ++r) out.push_back(stage_rank(stage) + d * replica_stride() + r);
  return out;
}

std::vector<int> StepShape::replica_stages(int stage) const {
  const int mirror = stages() - 1 - stage;
  if (schedule != PipelineSchedule::kDualPipe || mirror == stage) return {stage};
  return {std::min(stage, mirror), std::max(stage, mirror)};
}

std::vector<int> StepShape::data_group(int stage) const {
  // Megatron's data-parallel group of the dense blocks with context parallelism spans cp x dp.
  std::vector<int> out;
  for (int st : replica_stages(stage))
    for (int d = 0; d < dp; ++d)
      for (int c = 0; c < layout.cp; ++c) out.push_back(stage_rank(st) + d * replica_stride() + c * layout.tp);
  std::sort(out.begin(), out.end());  // with pp before dp, DualPipe's mirror stages interleave
  return out;
}

// The experts' groups in Megatron-Core's expert rank generator (order tp-ep-dp-pp, context
// parallelism folded into the others): expert rank = ((pp x edp + d) x ep + e) x etp + t; with
// pp before dp (order tp-ep-pp-dp) ((d x pp + pp_index) x ep + e) x etp + t, whose stages are the
// dense order's because etp x ep = tp x cp there (check_rank_order).
std::vector<int> StepShape::expert_tensor_group(int stage) const {
  std::vector<int> out;
  for (int t = 0; t < layout.expert_tp(); ++t) out.push_back(stage_rank(stage) + t);
  return out;
}

std::vector<int> StepShape::expert_group(int stage) const {
  std::vector<int> out;
  for (int e = 0; e < layout.ep; ++e) out.push_back(stage_rank(stage) + e * layout.expert_tp());
  return out;
}

namespace {
// An expert group's members by node (node -> its members, ascending).
std::map<int, std::vector<int>> members_by_node(const std::vector<int>& group, int gpus_per_node) {
  std::map<int, std::vector<int>> by_node;
  for (int r : group) by_node[r / gpus_per_node].push_back(r);
  return by_node;
}
}  // namespace

void check_dispatcher(const ModelSpec& model, const StepShape& shape, const StepSpec& spec) {
  if (spec.dispatcher == TokenDispatcher::kAllToAll) return;
  require(model.has_moe_layers(), "--dispatcher deepep dispatches the tokens of MoE layers; " + model.name + " has none");
  require(spec.routing.balanced(), "--dispatcher deepep with --routing " + spec.routing.to_string() +
                                       ": not built, its bytes are derived for a uniform routing");
  // The bytes follow from a balanced routing's hit probabilities over every token's k experts: no
  // padding to a capacity (f > 1) and no dropped rows (f < 1); f = 1 keeps every routed row.
  if (!model.dropless && model.capacity_factor != 1.0) {
    char f[32];
    std::snprintf(f, sizeof f, "%g", model.capacity_factor);
    throw InputError("--dispatcher deepep needs a dropless model or capacity_factor 1: " + model.name +
                     "'s capacity_factor " + f + (model.capacity_factor > 1 ? " pads" : " drops") +
                     " experts' rows, and DeepEP's bytes are derived for every token's top-k experts");
  }
  // DeepEP pairs each GPU with one peer on every other node: every expert group (each etp offset
  // and expert-data-parallel replica of every stage) must put as many ranks on each node it spans.
  const StepLayout& l = shape.layout;
  for (int s = 0; s < shape.stages(); ++s)
    for (int d = 0; d < l.edp(); ++d)
      for (int t = 0; t < l.expert_tp(); ++t) {
        std::vector<int> group;
        const int first = shape.stage_rank(s) + d * shape.expert_replica_stride() + t;
        for (int e = 0; e < l.ep; ++e) group.push_back(first + e * l.expert_tp());
        const auto by_node = members_by_node(group, shape.gpus_per_node);
        const auto& [node0, members0] = *by_node.begin();
        for (const auto& [node, members] : by_node)
          if (members.size() != members0.size())
            throw InputError("--dispatcher deepep: the expert group of ranks " + str(first) + " to " +
                             str(group.back()) + " puts " + str(static_cast<std::int64_t>(members0.size())) +
                             " on node " + str(node0) + " and " + str(static_cast<std::int64_t>(members.size())) +
                             " on node " + str(node) +
                             "; DeepEP needs the same number on every node (choose --ep, --etp and --pp so that "
                             "a stage's expert groups fill whole nodes or divide one)");
      }
}

std::vector<int> StepShape::expert_data_group(int stage) const {
  std::vector<int> out;
  for (int st : replica_stages(stage))
    for (int r = 0; r < layout.edp(); ++r) out.push_back(stage_rank(st) + r * expert_replica_stride());
  std::sort(out.begin(), out.end());  // with pp before dp, DualPipe's mirror stages interleave
  return out;
}

}  // namespace moesim
