#include "sim/memory/activations.h"

#include <algorithm>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "sim/core/checked_math.h"
#include "sim/core/error.h"
#include "sim/memory/model_states.h"
#include "sim/schedule/pipeline_schedule.h"
#include "sim/spec/model_parameters.h"

namespace moesim {
namespace {

constexpr std::int64_t kMaskBytes = 1;   // a dropout mask element (PyTorch keeps it as bool/uint8)
constexpr std::int64_t kFp32Bytes = 4;   // softmax statistics, router scores, logits
constexpr std::int64_t kTokenIdBytes = 8;  // int64 token ids

// The layout resolved against the model: the sizes every term below is a product of.
struct Dims {
  std::int64_t b = 1;
  std::int64_t s = 0;  // the whole sequence
  std::int64_t n = 0;  // tokens of a rank's sequence chunk: b s / cp
  std::int64_t e = 2;  // the model dtype's bytes
  std::int64_t t = 1;
  std::int64_t et = 1;  // the experts' tensor-parallel size
  bool own_shard = false;  // each rank routes its own tokens (routes_own_shard, sim/spec/step_spec.h)
  bool sp = false;
  bool dropout = false;
  AttentionKernel kernel = AttentionKernel::kFlash;
  MemoryStrategy strategy = MemoryStrategy::kNone;
  RecomputeModules modules;
};

void require(bool ok, const std::string& rule) {
  if (!ok) throw InputError(rule);
}

Dims resolve(const ModelSpec& m, const ActivationLayout& l) {
  require_architecture(m);
  Dims d;
  d.s = l.seq > 0 ? l.seq : m.architecture.seq_len;
  require(l.micro_batch >= 1, "--micro-batch must be at least 1, got " + std::to_string(l.micro_batch));
  require(l.seq >= 0, "--seq must be positive (0: the model's seq_len), got " + std::to_string(l.seq));
  require(l.tp >= 1 && l.cp >= 1, "tp and cp must be at least 1, got tp " + std::to_string(l.tp) + ", cp " +
                                      std::to_string(l.cp));
  require(d.s % l.cp == 0, "cp " + std::to_string(l.cp) + " must divide the sequence (" + std::to_string(d.s) + ")");
  require(!l.sequence_parallel || (d.s / l.cp) % l.tp == 0,
          "with sequence parallelism tp " + std::to_string(l.tp) + " must divide the sequence per context rank (" +
              std::to_string(d.s / l.cp) + ")");
  // Megatron-LM's context parallelism runs on fused attention kernels only (ring attention passes
  // softmax statistics between ranks, which the unfused path does not have).
  require(l.cp == 1 || l.attention == AttentionKernel::kFlash, "context parallelism needs flash attention");
  d.b = l.micro_batch;
  d.n = checked_mul(d.b, d.s / l.cp);
  d.e = m.element_bytes();
  d.t = l.tp;
  d.et = l.etp > 0 ? l.etp : l.tp;
  d.own_shard = routes_own_shard(l.tp, static_cast<int>(d.et), l.sequence_parallel);
  d.sp = l.sequence_parallel;
  d.dropout = m.architecture.dropout > 0;
  d.kernel = l.attention;
  d.strategy = l.moe_strategy;
  d.modules = l.modules;
  require(l.recompute != Recompute::kSelective || !d.modules.moe_act || d.strategy == MemoryStrategy::kNone,
          "--recompute-modules moe_act with --strategy " + std::string(to_string(d.strategy)) +
              ": the strategy already restores the experts' hidden columns, the activation's output among them");
  require(l.recompute != Recompute::kSelective || !d.modules.moe || d.strategy == MemoryStrategy::kNone,
          "--recompute-modules moe with --strategy " + std::string(to_string(d.strategy)) +
              ": recomputing the MoE layer re-creates T_DI and T_M, which the strategy would restore; give one of them");
  return d;
}

// A tensor over the rank's tokens at d_model-like width: replicated over the tensor-parallel
// ranks, split over them with sequence parallelism.
std::int64_t token_bytes(const Dims& d, std::int64_t width, std::int64_t bytes) {
  return checked_mul({d.n, width, bytes}) / (d.sp ? d.t : 1);
}
// A tensor over heads or MLP columns, split over the tensor-parallel ranks (width divides by t).
std::int64_t split_bytes(const Dims& d, std::int64_t width, std::int64_t bytes) {
  return checked_mul({d.n, width / d.t, bytes});
}
std::int64_t mask_bytes(const Dims& d, std::int64_t width) { return d.dropout ? token_bytes(d, width, kMaskBytes) : 0; }

// The attention block's tensors: `kept` always, `core` what selective recomputation drops, and
// `core_recompute` what re-running the core re-creates in backward; `up_proj` what of `kept`
// mla_up_proj drops and re-creates (MLA's q, k and v; 0 for other attention).
struct AttentionPart {
  std::int64_t kept = 0;
  std::int64_t core = 0;
  std::int64_t core_recompute = 0;
  std::int64_t up_proj = 0;
};

// The attention core over `heads` query heads whose output is `out_width` wide. Unfused: per
// (query, key) pair and head the softmax output, with dropout its mask and its output (the
// input of the GEMM with V): Korthikanti's 5as^2b in fp16. Flash: the fp32 log-sum-exp per query
// and head; re-running it re-creates its output too (the output projection keeps its own).
void add_core(AttentionPart& p, const Dims& d, std::int64_t heads, std::int64_t out_width) {
  if (d.kernel == AttentionKernel::kUnfused) {
    const std::int64_t per_pair = d.e + (d.dropout ? kMaskBytes + d.e : 0);
    p.core = checked_mul({d.b, heads / d.t, d.s, d.s, per_pair});  // cp is 1 (resolve)
    p.core_recompute = p.core;
  } else {
    p.core = checked_mul({d.n, heads / d.t, kFp32Bytes});
    p.core_recompute = p.core + split_bytes(d, out_width, d.e);
  }
}

// MHA and GQA: the norm's input, the QKV projection's input, q, k, v (unfused: k and v repeated
// to every query head, as Megatron-LM's unfused path expands them for its batched GEMMs), with qk
// norms their inputs, the core's output (the output projection's input), the output dropout's mask.
AttentionPart grouped_attention(const ModelSpec& m, const Dims& d) {
  const AttentionSpec& a = m.architecture.attention;
  const std::int64_t q = a.num_heads * a.head_dim;
  const std::int64_t kv = (d.kernel == AttentionKernel::kUnfused ? a.num_heads : a.num_kv_heads) * a.head_dim;
  AttentionPart p;
  p.kept = 2 * token_bytes(d, m.d_model, d.e) + split_bytes(d, q, d.e) + 2 * split_bytes(d, kv, d.e) +
           split_bytes(d, q, d.e) + mask_bytes(d, m.d_model);
  if (a.qk_norm) p.kept += split_bytes(d, q + a.num_kv_heads * a.head_dim, d.e);
  add_core(p, d, a.num_heads, q);
  return p;
}

// MLA (DeepSeek-V2/V3): the norm's input, the down projections' shared input, each latent's norm
// input and up projection's input (latents are d_model-like: replicated over t, split with SP),
// the up-projected q and k (heads x (nope + rope), the rotary key broadcast to every head), v and
// the core's output (heads x v_head_dim), the output dropout's mask.
AttentionPart latent_attention(const ModelSpec& m, const Dims& d) {
  const AttentionSpec& a = m.architecture.attention;
  const std::int64_t qk = a.num_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim);
  const std::int64_t v = a.num_heads * a.v_head_dim;
  AttentionPart p;
  p.kept = 2 * token_bytes(d, m.d_model, d.e) + 2 * token_bytes(d, a.q_lora_rank + a.kv_lora_rank, d.e) +
           2 * split_bytes(d, qk, d.e) + 2 * split_bytes(d, v, d.e) + mask_bytes(d, m.d_model);
  p.up_proj = 2 * split_bytes(d, qk, d.e) + split_bytes(d, v, d.e);  // the core's output stays: proj's input
  add_core(p, d, a.num_heads, v);
  return p;
}

AttentionPart attention_part(const ModelSpec& m, const Dims& d) {
  return m.architecture.attention.kind == AttentionKind::kMla ? latent_attention(m, d) : grouped_attention(m, d);
}

// An MLP's column-split tensors at hidden width ff: fc1's output as the activation's backward
// needs it (swiglu: both halves; gelu: its input; relu: none, its backward reads its own output)
// and the activation's output, fc2's input.
std::int64_t mlp_columns(const ModelSpec& m, std::int64_t ff) {
  const std::int64_t fc1 = m.activation == Activation::kSwiglu ? 2 * ff : m.activation == Activation::kGelu ? ff : 0;
  return fc1 + ff;
}

// The dense MLP block: its norm's input, fc1's input, the columns, the output dropout's mask.
std::int64_t dense_mlp(const ModelSpec& m, const Dims& d, std::int64_t ff) {
  return 2 * token_bytes(d, m.d_model, d.e) + split_bytes(d, mlp_columns(m, ff), d.e) + mask_bytes(d, m.d_model);
}

// The rows E x C a rank routing `tokens` tokens sends: capacity per expert C = floor(k f N / E) as
// the MoE layer's buffers have it (the relative slack absorbs f's binary representation error, as
// sim/build/layer_dims.cc does); uniform routing fills every expert to C whatever ep is.
std::int64_t routed_rows(const ModelSpec& m, std::int64_t tokens) {
  const double raw = static_cast<double>(checked_mul(m.top_k, tokens)) * m.capacity_factor / m.num_experts;
  return checked_mul(m.num_experts, static_cast<std::int64_t>(raw * (1.0 + 1e-12)));
}

// The rows a rank routing its own shard (own_shard) sends: E x C(its tokens).
std::int64_t own_routed_rows(const ModelSpec& m, const Dims& d) { return routed_rows(m, d.n / (d.sp ? d.t : 1)); }

// The shared experts' columns (fc1's output as the activation's backward needs it, and its output).
std::int64_t shared_columns(const ModelSpec& m, const Dims& d) {
  if (m.shared_experts.count == 0) return 0;
  return split_bytes(d, mlp_columns(m, m.shared_experts.count * m.shared_experts.d_ffn), d.e);
}

// T_DI and T_M over the rows the rank's experts hold: the tensor-parallel group's E x C, or with
// own_shard the rows the all-to-all brought to the etp ranks, all-gathered (columns split over etp).
MoeReusedTensors reused_tensors(const ModelSpec& m, const Dims& d) {
  if (d.own_shard) {
    const std::int64_t gathered = checked_mul(own_routed_rows(m, d), d.et);
    return {checked_mul({gathered, m.d_model, d.e}), checked_mul({gathered, mlp_columns(m, m.d_ffn) / d.et, d.e}),
            checked_mul({gathered, m.d_ffn / d.et, d.e})};
  }
  const std::int64_t rows = routed_rows(m, d.n);
  return {checked_mul({rows, m.d_model, d.e}), checked_mul({rows, mlp_columns(m, m.d_ffn) / d.t, d.e}),
          checked_mul({rows, m.d_ffn / d.t, d.e})};
}

// The MoE MLP block. Over the rank's tokens: the norm's input, the router's (and shared experts')
// input, the fp32 router scores over all experts and top-k weights, the shared experts' columns,
// the output dropout's mask. With own_shard (tp > 1 with sequence parallelism, or etp != tp:
// Megatron-Core's all-to-all dispatcher) each rank routes its own tokens (its sequence-parallel
// shard), and its experts see the rows the all-to-all brought to the etp ranks, all-gathered over
// them: etp x E x C(own tokens) rows of fc1 input and columns split over etp; the output kept for
// the combine is the rank's own rows. Otherwise over the rows dispatched to the rank's experts
// (the tensor-parallel group's tokens): fc1's input (whole d_model rows), the experts' columns
// (split over t) and their output, kept for the gradient of the combine's top-k weights (rows
// follow the tokens' layout).
std::int64_t moe_mlp(const ModelSpec& m, const Dims& d) {
  std::int64_t bytes = 2 * token_bytes(d, m.d_model, d.e) + token_bytes(d, m.num_experts + m.top_k, kFp32Bytes) +
                       mask_bytes(d, m.d_model);
  bytes += shared_columns(m, d);
  if (d.own_shard) {
    const MoeReusedTensors t = reused_tensors(m, d);  // the gathered rows a strategy restores
    if (d.strategy == MemoryStrategy::kNone) bytes += t.t_di + t.t_m;
    return bytes + checked_mul({own_routed_rows(m, d), m.d_model, d.e});
  }
  const std::int64_t rows = routed_rows(m, d.n);
  bytes += checked_mul({rows, m.d_model, d.e}) / (d.sp ? d.t : 1);
  if (d.strategy == MemoryStrategy::kNone) {
    const MoeReusedTensors t = reused_tensors(m, d);
    bytes += t.t_di + t.t_m;
  }
  return bytes;
}

// The routed experts' activation output (fc2's input) over the rank's expert rows, as moe_mlp
// counts it: what recomputing moe_act drops.
std::int64_t moe_act_output(const ModelSpec& m, const Dims& d) {
  if (d.own_shard) {
    return checked_mul({own_routed_rows(m, d), d.et, m.d_ffn / d.et, d.e});
  }
  return checked_mul({routed_rows(m, d.n), m.d_ffn / d.t, d.e});
}

// An MLP block's kept tensors and what of them each module recomputation drops and re-creates.
struct MlpPart {
  std::int64_t kept = 0;
  std::int64_t module = 0;          // mlp (a dense MLP) or moe (an MoE MLP): everything but the inputs
  std::int64_t moe_act = 0;         // the routed experts' activation output
  std::int64_t shared_experts = 0;  // the shared experts' columns
  bool moe = false;
};

// The dense MLP: `mlp` checkpoints it with Transformer Engine's fused norm inside, so it keeps the
// norm's input (the checkpoint's) and drops fc1's input (the norm's output) and the columns.
MlpPart dense_mlp_part(const ModelSpec& m, const Dims& d) {
  const std::int64_t ff = m.architecture.dense_d_ffn;
  return {dense_mlp(m, d, ff), token_bytes(d, m.d_model, d.e) + split_bytes(d, mlp_columns(m, ff), d.e), 0, 0, false};
}

// The MoE MLP: `moe` checkpoints the MoE layer from the pre-MLP norm's output on, so the norm's
// input and output (the checkpoint's input) and the output dropout's mask stay.
MlpPart moe_mlp_part(const ModelSpec& m, const Dims& d) {
  const std::int64_t kept = moe_mlp(m, d);
  return {kept, kept - 2 * token_bytes(d, m.d_model, d.e) - mask_bytes(d, m.d_model), moe_act_output(m, d),
          shared_columns(m, d), true};
}

// Moves `bytes` from what the layer keeps to what its recomputation re-creates.
void drop(LayerActivations& a, std::int64_t bytes) {
  a.kept_bytes -= bytes;
  a.recompute_bytes += bytes;
}

// Selective recomputation of the modules d.modules names: the attention core (its tensors), MLA's
// up projections (q, k, v), the layer norms that are modules of their own (`norms` outputs, each
// the next GEMM's d_model-wide input; recomputable_norms), and of the MLP block either the whole
// module (mlp for a dense layer, moe for an MoE layer; what moe_act and shared_experts would drop
// is inside it) or the routed experts' activation output and the shared experts' columns. What it
// drops is re-run together before the layer's backward (sim/step), so the re-created tensors live
// together.
LayerActivations selective(const AttentionPart& att, const MlpPart& mlp, int norms, const ModelSpec& m,
                           const Dims& d) {
  const RecomputeModules& r = d.modules;
  LayerActivations out{att.kept + mlp.kept, 0};
  if (r.core_attn) {
    out.recompute_bytes += att.core_recompute;
  } else {
    out.kept_bytes += att.core;
  }
  if (r.mla_up_proj) drop(out, att.up_proj);
  if (r.layernorm) drop(out, norms * token_bytes(d, m.d_model, d.e));
  if (mlp.moe ? r.moe : r.mlp) {
    drop(out, mlp.module);
    return out;
  }
  if (r.moe_act) drop(out, mlp.moe_act);
  if (r.shared_experts) drop(out, mlp.shared_experts);
  return out;
}

// Applies the recomputation to a layer whose attention is `att` and MLP block `mlp`.
LayerActivations with_recompute(const AttentionPart& att, const MlpPart& mlp, const ModelSpec& m, const Dims& d,
                                Recompute r) {
  const std::int64_t all = att.kept + att.core + mlp.kept;
  switch (r) {
    case Recompute::kNone:
      return {all, 0};
    case Recompute::kSelective:
      return selective(att, mlp, recomputable_norms(m, mlp.moe), m, d);
    case Recompute::kFull: {
      // Only the layer's input stays (Korthikanti's 2sbh); re-running the forward re-creates the rest.
      const std::int64_t input = token_bytes(d, m.d_model, d.e);
      return {input, all - input};
    }
  }
  throw InternalError("unknown Recompute");
}

void check_ep(const ModelSpec& m, int ep, const ActivationLayout& l) {
  require(ep >= 1, "ep must be at least 1, got " + std::to_string(ep));
  check_tensor_expert_parallel(m, l.tp, ep, l.etp);
}

// The parts the schedule cuts the model into (DualPipeV: two per stage).
int parts_of(const PipelineLayout& p) {
  return p.schedule == PipelineSchedule::kDualPipeV ? 2 * p.stages : p.stages * p.virtual_stages;
}

void check_pipeline(const ModelSpec& m, const PipelineLayout& p, int stage) {
  require(p.stages >= 1 && p.virtual_stages >= 1 && p.microbatches >= 1,
          "pipeline stages, virtual stages and microbatches must be at least 1");
  require(stage >= 0 && stage < p.stages, "stage " + std::to_string(stage) + " is outside 0.." +
                                              std::to_string(p.stages - 1));
  if (p.schedule == PipelineSchedule::kDualPipe || p.schedule == PipelineSchedule::kDualPipeV ||
      p.schedule == PipelineSchedule::kZeroBubbleH1) {
    const std::string problem = schedule_problem(p.schedule, {p.stages, p.virtual_stages, p.microbatches});
    require(problem.empty(), problem);
  }
  const bool interleaved = p.schedule == PipelineSchedule::kInterleaved;
  require(interleaved || p.virtual_stages == 1, "virtual stages need the interleaved schedule");
  require(!p.combined_1f1b || interleaved || (p.schedule == PipelineSchedule::kOneFOneB && p.stages == 1),
          "the combined 1F1B runs without pipelining or with the interleaved schedule");
  // Megatron-LM's interleaved schedule runs microbatches in groups of p.
  require(!interleaved || p.microbatches % p.stages == 0,
          "the interleaved schedule needs microbatches divisible by the stages");
  const int parts = parts_of(p);
  if (p.part_layers.empty()) {
    require(m.num_layers % parts == 0, "the " + std::to_string(parts) +
                                           " model parts (stages x virtual stages; DualPipeV 2 x stages) must divide the " +
                                           std::to_string(m.num_layers) + " layers");
    return;
  }
  require(static_cast<int>(p.part_layers.size()) == parts,
          "the part layers list " + std::to_string(p.part_layers.size()) + " parts; the schedule cuts " +
              std::to_string(parts));
  long long sum = 0;
  for (int n : p.part_layers) {
    require(n >= 0, "a model part's layer count must not be negative");
    sum += n;
  }
  require(sum == m.num_layers, "the part layers sum to " + std::to_string(sum) + "; the model has " +
                                   std::to_string(m.num_layers));
}

// The first layer of each model part and, last, the layer count.
std::vector<int> part_starts(const ModelSpec& m, const PipelineLayout& p) {
  const int parts = parts_of(p);
  std::vector<int> out{0};
  for (int q = 0; q < parts; ++q)
    out.push_back(out.back() + (p.part_layers.empty() ? m.num_layers / parts : p.part_layers[static_cast<std::size_t>(q)]));
  return out;
}

// The chunks of the (microbatch, chunk) pairs whose activations the stage's own program holds at
// its peak, from F to B, or to W when the backward is split: DualPipe's two directions interleave
// irregularly, and ZB-H1's deferred W passes keep up to min(p, m) microbatches on every stage
// (the step keeps a layer's activations whole until its W; Qi et al. count only what W reads).
// Per chunk of a stage: what a microbatch keeps in it from its forward to its last backward pass,
// and what recomputation re-creates in it (a split backward holds that from the B pass to the W).
struct ChunkBytes {
  std::vector<std::int64_t> kept, recomputed;
};

struct ProgramPeak {
  std::int64_t bytes = 0;
  std::int64_t in_flight = 0;
};

bool program_schedule(PipelineSchedule s) {
  return s == PipelineSchedule::kDualPipe || s == PipelineSchedule::kDualPipeV || s == PipelineSchedule::kZeroBubbleH1;
}

// The stage's program walked pass by pass: each (microbatch, chunk) holds its kept bytes from its
// forward to its last backward pass (W where split), and from its input-gradient pass to its W
// pass also what recomputation re-created; the largest sum, and the passes in flight then.
ProgramPeak program_peak(const PipelineLayout& p, int stage, const ChunkBytes& bytes) {
  const PipelineShape shape{p.stages, p.virtual_stages, p.microbatches};
  const auto program = stage_programs(p.schedule, shape)[static_cast<std::size_t>(stage)];
  std::map<std::pair<int, int>, bool> live;  // (microbatch, chunk) -> past its input-gradient pass
  ProgramPeak peak;
  for (const PipeAction& a : program) {
    const std::pair<int, int> key{a.microbatch, a.chunk};
    if (a.work == PipeWork::kForward) live[key] = false;
    if (a.work == PipeWork::kBackwardInput) live[key] = true;
    if (a.work == PipeWork::kBackward || a.work == PipeWork::kBackwardWeight) live.erase(key);
    std::int64_t held = 0;
    for (const auto& [mc, recomputed] : live) {
      const auto c = static_cast<std::size_t>(mc.second);
      held += bytes.kept[c] + (recomputed ? bytes.recomputed[c] : 0);
    }
    if (held <= peak.bytes) continue;
    peak.bytes = held;
    peak.in_flight = static_cast<std::int64_t>(live.size());
  }
  return peak;
}

// The passes in flight at the stage's peak, in the order they started; each entry is the chunk it
// runs through.
// Not for the program schedules (program_peak).
std::vector<int> in_flight_chunks(const PipelineLayout& p, int stage) {
  const std::int64_t m = p.microbatches;
  std::int64_t passes = 0;
  switch (p.schedule) {
    case PipelineSchedule::kGpipe:
      passes = m;
      break;
    case PipelineSchedule::kOneFOneB:
      passes = std::min<std::int64_t>(p.stages - stage, m);
      break;
    case PipelineSchedule::kInterleaved:
      passes = std::min<std::int64_t>(2 * (p.stages - stage - 1) + (p.virtual_stages - 1) * p.stages + 1,
                                      m * p.virtual_stages);
      break;
    case PipelineSchedule::kZeroBubbleH1:
    case PipelineSchedule::kDualPipe:
    case PipelineSchedule::kDualPipeV: break;  // program_peak
  }
  if (p.combined_1f1b) {
    const std::int64_t all = m * (p.schedule == PipelineSchedule::kInterleaved ? p.virtual_stages : 1);
    passes = std::min(passes + 1, all);
  }
  std::vector<int> chunks(static_cast<std::size_t>(passes));
  for (std::int64_t k = 0; k < passes; ++k)  // forwards take the chunks in groups of p microbatches
    chunks[static_cast<std::size_t>(k)] = static_cast<int>((k / p.stages) % p.virtual_stages);
  return chunks;
}

}  // namespace

int recomputable_norms(const ModelSpec& m, bool moe_layer) {
  return (m.architecture.attention.kind == AttentionKind::kMla ? 1 : 0) + (moe_layer ? 1 : 0);
}

LayerActivations dense_layer_activations(const ModelSpec& m, const ActivationLayout& l) {
  const Dims d = resolve(m, l);
  check_ep(m, 1, l);
  require(m.architecture.dense_d_ffn > 0, "model " + m.name + " has no dense layers (no architecture.dense_d_ffn)");
  return with_recompute(attention_part(m, d), dense_mlp_part(m, d), m, d, l.recompute);
}

LayerActivations moe_layer_activations(const ModelSpec& m, const ActivationLayout& l, int ep) {
  const Dims d = resolve(m, l);
  check_ep(m, ep, l);
  require(m.has_moe_layers(), "model " + m.name + " has no MoE layers");
  return with_recompute(attention_part(m, d), moe_mlp_part(m, d), m, d, l.recompute);
}

MoeReusedTensors moe_reused_tensors(const ModelSpec& m, const ActivationLayout& l) { return reused_tensors(m, resolve(m, l)); }

LayerActivations layer_activations(const ModelSpec& m, const ActivationLayout& l, int ep, int layer) {
  return is_moe_layer(m, layer) ? moe_layer_activations(m, l, ep) : dense_layer_activations(m, l);
}

std::int64_t embedding_activations(const ModelSpec& m, const ActivationLayout& l) {
  const Dims d = resolve(m, l);
  return checked_mul(d.n, kTokenIdBytes) + mask_bytes(d, m.d_model);
}

std::int64_t output_activations(const ModelSpec& m, const ActivationLayout& l) {
  const Dims d = resolve(m, l);
  // The vocabulary is split over t, padded to a multiple of it as Megatron-LM pads it.
  const std::int64_t vocab_per_rank = (m.architecture.vocab_size + d.t - 1) / d.t;
  return 2 * token_bytes(d, m.d_model, d.e) + checked_mul({d.n, vocab_per_rank, kFp32Bytes});
}

std::int64_t mtp_activations(const ModelSpec& m, const ActivationLayout& l) {
  const Dims d = resolve(m, l);
  return 2 * token_bytes(d, m.d_model, d.e) + token_bytes(d, 2 * m.d_model, d.e) + output_activations(m, l);
}

StageActivations stage_activations(const ModelSpec& m, const ActivationLayout& l, int ep, const PipelineLayout& p,
                                   int stage) {
  check_pipeline(m, p, stage);
  const int parts = parts_of(p);
  const std::vector<int> starts = part_starts(m, p);
  StageActivations out;
  const PipelineShape shape{p.stages, p.virtual_stages, p.microbatches};
  const int stage_chunks = chunks_per_stage(p.schedule, shape);
  // A split backward holds what recomputation re-creates from its B pass to its W pass: the
  // program schedules count it per chunk; one layer's is the transient of a whole backward.
  const bool program = program_schedule(p.schedule);
  ChunkBytes chunk{std::vector<std::int64_t>(static_cast<std::size_t>(stage_chunks)),
                   std::vector<std::int64_t>(static_cast<std::size_t>(stage_chunks))};
  const auto add_layer = [&](std::size_t c, const LayerActivations& a) {
    chunk.kept[c] += a.kept_bytes;
    chunk.recomputed[c] += a.recompute_bytes;
    out.recompute_bytes = std::max(out.recompute_bytes, a.recompute_bytes);
  };
  for (int c = 0; c < stage_chunks; ++c) {
    // Interleaved: chunk c of stage s holds model part c p + s; DualPipe's chunk 1 part p - 1 - s,
    // DualPipeV's 2p - 1 - s (sim/schedule/pipeline_schedule.h).
    const int part = model_part(p.schedule, shape, stage, c);
    const auto ci = static_cast<std::size_t>(c);
    for (int layer = starts[static_cast<std::size_t>(part)]; layer < starts[static_cast<std::size_t>(part) + 1];
         ++layer)
      add_layer(ci, layer_activations(m, l, ep, layer));
    if (part == 0) chunk.kept[ci] += embedding_activations(m, l);
    if (part == parts - 1) {
      chunk.kept[ci] += output_activations(m, l);
      for (int i = 0; i < m.architecture.mtp_depth; ++i) {
        add_layer(ci, layer_activations(m, l, ep, m.num_layers - 1));
        chunk.kept[ci] += mtp_activations(m, l);
      }
    }
  }
  if (program) {
    const ProgramPeak peak = program_peak(p, stage, chunk);
    out.kept_bytes = peak.bytes;
    out.in_flight = peak.in_flight;
    return out;
  }
  const std::vector<int> chunks = in_flight_chunks(p, stage);
  for (int c : chunks) out.kept_bytes += chunk.kept[static_cast<std::size_t>(c)];
  out.in_flight = static_cast<std::int64_t>(chunks.size());
  return out;
}

}  // namespace moesim
