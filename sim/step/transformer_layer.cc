#include "sim/step/transformer_layer.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "sim/core/error.h"
#include "sim/spec/model_parameters.h"
#include "sim/step/moe_mlp.h"

namespace moesim {
namespace {

std::int64_t per_rank(std::int64_t width, int tp) { return width / tp; }

std::vector<LinearShape> attention_inputs(const ModelSpec& model, int tp) {
  const AttentionSpec& a = model.architecture.attention;
  const std::int64_t h = model.d_model;
  if (a.kind != AttentionKind::kMla) {
    const std::int64_t q = std::int64_t{a.num_heads} * a.head_dim;
    const std::int64_t kv = std::int64_t{a.num_kv_heads} * a.head_dim;
    return {{"qkv", h, per_rank(q + 2 * kv, tp)}};
  }
  // MLA: the down projections to the latents are replicated on the tensor-parallel ranks (as
  // Megatron-Core's MLA), the up projections split by heads.
  std::vector<LinearShape> out;
  const std::int64_t qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim;
  if (a.q_lora_rank > 0) {
    out.push_back({"q_down", h, a.q_lora_rank});
    out.push_back({"q_up", a.q_lora_rank, per_rank(std::int64_t{a.num_heads} * qk_head, tp)});
  } else {
    out.push_back({"q", h, per_rank(std::int64_t{a.num_heads} * qk_head, tp)});
  }
  out.push_back({"kv_down", h, a.kv_lora_rank + a.qk_rope_head_dim});
  out.push_back({"kv_up", a.kv_lora_rank,
                 per_rank(std::int64_t{a.num_heads} * (a.qk_nope_head_dim + a.v_head_dim), tp)});
  return out;
}

}  // namespace

TransformerDims transformer_dims(const ModelSpec& model, const StepShape& shape, const StepSpec& spec) {
  const ArchitectureSpec& arch = model.architecture;
  const AttentionSpec& a = arch.attention;
  const int tp = shape.layout.tp;
  TransformerDims d;
  d.tokens = shape.tokens();
  d.region_tokens = spec.sequence_parallel ? d.tokens / tp : d.tokens;
  d.hidden = model.d_model;
  d.attention_in = attention_inputs(model, tp);
  d.heads = a.num_heads / tp;
  d.qk_dim = a.kind == AttentionKind::kMla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
  d.v_dim = a.kind == AttentionKind::kMla ? a.v_head_dim : a.head_dim;
  d.attention_out = {"proj", d.heads * d.v_dim, model.d_model};
  d.keys = shape.seq;
  d.cp = shape.layout.cp;
  if (a.kind == AttentionKind::kMla) {
    // MLA's keys carry the no-rope and the shared rope parts; its values v_head_dim.
    d.kv_width = d.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim);
  } else {
    d.kv_width = 2 * std::max<std::int64_t>(1, a.num_kv_heads / tp) * a.head_dim;
  }
  d.batch = shape.micro_batch;
  const bool gated = model.activation == Activation::kSwiglu;
  d.ffn = per_rank(arch.dense_d_ffn, tp);
  d.fc1 = {"fc1", model.d_model, gated ? 2 * d.ffn : d.ffn};
  d.fc2 = {"fc2", d.ffn, model.d_model};
  d.dropout = arch.dropout > 0;
  d.sequence_parallel = spec.sequence_parallel;
  d.kernel = spec.attention;
  return d;
}

// Multi-token prediction modules' layers (numbered from num_layers on) are of the last layer's kind.
bool TransformerLayer::moe_layer(int layer) const {
  return moe_ != nullptr && is_moe_layer(model_, std::min(layer, model_.num_layers - 1));
}

bool TransformerLayer::mlp_block_collectives(int layer) const { return !moe_layer(layer) || !moe_->own_shard(); }

TaskName TransformerLayer::name(int layer, Pass pass, const std::string& what, const std::string& stage) const {
  return TaskName{"L" + std::to_string(layer), layer, pass, what, stage};
}

void TransformerLayer::tp_collective(Chain& chain, int layer, Pass pass, const std::string& what, CollectiveOp op,
                                     std::int64_t tokens, const std::string& prefix, std::int64_t width) {
  e_.group_collective(chain, name(layer, pass, prefix + "tp." + what, prefix.empty() ? "tp" : "recompute"),
                      StreamClass::kCommDispatch, op, e_.shape().tensor_group(chain.stage),
                      tokens * (width > 0 ? width : d_.hidden) * e_.shape().element_bytes);
}

Fp8Amax TransformerLayer::input_amax(int stage, const LinearShape& l) const {
  Fp8Amax amax;
  amax.fused = l.name == "qkv" || l.name == "fc1" || l.name == "q_up" || l.name == "kv_up";
  const bool column_parallel = amax.fused || l.name == "q";
  if (d_.sequence_parallel && column_parallel) amax.reduce_over = e_.shape().tensor_group(stage);
  return amax;
}

Fp8Amax TransformerLayer::grad_amax(int stage, const LinearShape& l) const {
  Fp8Amax amax;
  if (d_.sequence_parallel && (l.name == "proj" || l.name == "fc2")) amax.reduce_over = e_.shape().tensor_group(stage);
  return amax;
}

int TransformerLayer::fp8_gemms(int layer) const {
  const int attention = static_cast<int>(d_.attention_in.size()) + 1;
  return attention + (moe_layer(layer) ? moe_->fp8_gemms() : 2);
}

void TransformerLayer::linear_forward(Chain& chain, int layer, const LinearShape& l, const std::string& prefix) {
  const std::string stage = prefix.empty() ? l.name : "recompute";
  if (e_.fp8()) {
    // The weight is quantised in the stage's first forward of the layer and cached for the other
    // microbatches (StepEmitter::fp8_weight_cast); the input is quantised for every pass.
    if (prefix.empty()) e_.fp8_weight_cast(chain, name(layer, Pass::kForward, l.name, "fp8"), l.in * l.out);
    e_.fp8_quantize(chain, name(layer, Pass::kForward, prefix + l.name + ".fp8.input", prefix.empty() ? "fp8" : stage),
                    d_.tokens * l.in, input_amax(chain.stage, l));
  }
  e_.kernel(chain, name(layer, Pass::kForward, prefix + l.name, stage), e_.gemm(1, d_.tokens, l.out, l.in));
}

void TransformerLayer::linear_backward(Chain& chain, int layer, const LinearShape& l, BackwardPart part,
                                       bool gathered_input, const std::vector<BufferId>& wgrad_frees) {
  if (part != BackwardPart::kWeight) {
    // FP8: the output gradient quantised (and transposed for dW) before both of its GEMMs.
    if (e_.fp8())
      e_.fp8_quantize(chain, name(layer, Pass::kBackward, l.name + ".fp8.grad", "fp8"), d_.tokens * l.out,
                      grad_amax(chain.stage, l));
    // dX = dY W^T
    e_.kernel(chain, name(layer, Pass::kBackward, l.name + ".dgrad", l.name), e_.gemm(1, d_.tokens, l.in, l.out, GemmLayout::kNT));
  }
  if (part != BackwardPart::kInput) {
    TaskName wgrad = name(layer, Pass::kBackward, l.name + ".wgrad", l.name);
    wgrad.frees = wgrad_frees;
    if (gathered_input && d_.sequence_parallel) {
      // The block's input gathered again for dW, beside the input gradient (Megatron-LM).
      Chain side = chain;
      e_.group_collective(side, name(layer, Pass::kBackward, l.name + ".tp.allgather", "tp"),
                          StreamClass::kCommCombine, CollectiveOp::kAllGather, e_.shape().tensor_group(chain.stage),
                          d_.tokens * d_.hidden * e_.shape().element_bytes);
      e_.kernel(side, wgrad, e_.gemm(1, l.in, l.out, d_.tokens, GemmLayout::kTN), true);
      if (part == BackwardPart::kWeight) chain.last = side.last;
      return;
    }
    // dW = X^T dY, off the chain in a whole backward: nothing of the layer's backward waits for it.
    e_.kernel(chain, wgrad, e_.gemm(1, l.in, l.out, d_.tokens, GemmLayout::kTN), part == BackwardPart::kAll);
  }
}

void TransformerLayer::core_forward(Chain& chain, int layer, const std::string& prefix,
                                    const std::vector<BufferId>& allocates) {
  const std::string stage = prefix.empty() ? "attention" : "recompute";
  const std::int64_t bh = d_.batch * d_.heads;
  const std::int64_t queries = d_.tokens / d_.batch;
  if (d_.kernel == AttentionKernel::kFlash && d_.cp > 1) {
    ring_core(chain, layer, Pass::kForward, prefix, allocates);
    return;
  }
  if (d_.kernel == AttentionKernel::kFlash) {
    // Q K^T and P V in one kernel; the causal mask leaves each query half the keys on average.
    TaskName n = name(layer, Pass::kForward, prefix + "core", stage);
    n.allocates = allocates;
    e_.kernel(chain, n, e_.storage_gemm(bh, queries, (d_.keys + 1) / 2, d_.qk_dim + d_.v_dim));
    return;
  }
  const std::int64_t scores = bh * queries * d_.keys;
  TaskName first = name(layer, Pass::kForward, prefix + "scores", stage);
  first.allocates = allocates;
  e_.kernel(chain, first, e_.storage_gemm(bh, queries, d_.keys, d_.qk_dim));
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "softmax", stage), e_.elementwise(scores, scores));
  if (d_.dropout)
    e_.kernel(chain, name(layer, Pass::kForward, prefix + "attn_dropout", stage),
              e_.elementwise(scores, scores, scores));
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "context", stage), e_.storage_gemm(bh, queries, d_.v_dim, d_.keys));
}

void TransformerLayer::ring_core(Chain& chain, int layer, Pass pass, const std::string& prefix,
                                 const std::vector<BufferId>& allocates) {
  const bool forward = pass == Pass::kForward;
  const std::string stage = prefix.empty() ? "attention" : "recompute";
  const std::int64_t bh = d_.batch * d_.heads;
  const std::int64_t queries = d_.tokens / d_.batch;
  // Each block pairs the rank's queries with one rank's keys; causal and load-balanced (each
  // rank holds two of 2 cp sequence chunks), every block does on average 1/cp of half the keys.
  const std::int64_t keys = std::max<std::int64_t>(1, (d_.keys + 2 * d_.cp - 1) / (2 * d_.cp));
  const std::int64_t width = forward ? d_.qk_dim + d_.v_dim : 3 * d_.qk_dim + 2 * d_.v_dim;
  // A ring step sends the rank's keys and values to the next rank (in backward also their
  // gradients back): an all-to-allv over the context-parallel group with one pair per member.
  const auto group = e_.shape().context_group(chain.stage);
  const int cp = static_cast<int>(group.size());
  const std::int64_t bytes = d_.tokens * d_.kv_width * e_.shape().element_bytes * (forward ? 1 : 2);
  std::vector<std::pair<int, int>> ring_pairs;
  for (int s = 0; s < cp; ++s) ring_pairs.emplace_back(s, (s + 1) % cp);
  Chain ring = chain;  // the ring's steps follow one another on their own stream
  for (int j = 0; j < cp; ++j) {
    if (j > 0)
      e_.sends(ring, name(layer, pass, prefix + "cp.ring" + std::to_string(j), prefix.empty() ? "cp" : "recompute"),
               StreamClass::kCommCombine, group, ring_pairs, bytes);
    TaskName n = name(layer, pass, prefix + "core.block" + std::to_string(j), stage);
    if (j == 0) n.allocates = allocates;
    const TaskIndex block = e_.kernel(chain, n, e_.storage_gemm(bh, queries, keys, width));
    if (j > 0) e_.graph().add_dependency(*ring.last, block);
  }
}

void TransformerLayer::core_backward(Chain& chain, int layer) {
  const std::int64_t bh = d_.batch * d_.heads;
  const std::int64_t queries = d_.tokens / d_.batch;
  if (d_.kernel == AttentionKernel::kFlash && d_.cp > 1) {
    ring_core(chain, layer, Pass::kBackward, "", {});
    return;
  }
  if (d_.kernel == AttentionKernel::kFlash) {
    e_.kernel(chain, name(layer, Pass::kBackward, "core", "attention"),
              e_.storage_gemm(bh, queries, (d_.keys + 1) / 2, 3 * d_.qk_dim + 2 * d_.v_dim));
    return;
  }
  const std::int64_t scores = bh * queries * d_.keys;
  // dP = dO V^T and dV = P^T dO; then dropout's and softmax's backward; dQ = dS K, dK = dS^T Q.
  e_.kernel(chain, name(layer, Pass::kBackward, "context.dgrad", "attention"), e_.storage_gemm(bh, queries, d_.keys, d_.v_dim));
  e_.kernel(chain, name(layer, Pass::kBackward, "context.vgrad", "attention"), e_.storage_gemm(bh, d_.keys, d_.v_dim, queries));
  if (d_.dropout)
    e_.kernel(chain, name(layer, Pass::kBackward, "attn_dropout", "attention"),
              e_.elementwise(scores, scores, scores));
  e_.kernel(chain, name(layer, Pass::kBackward, "softmax", "attention"), e_.elementwise(2 * scores, scores));
  e_.kernel(chain, name(layer, Pass::kBackward, "scores.qgrad", "attention"),
            e_.storage_gemm(bh, queries, d_.qk_dim, d_.keys));
  e_.kernel(chain, name(layer, Pass::kBackward, "scores.kgrad", "attention"),
            e_.storage_gemm(bh, d_.keys, d_.qk_dim, queries));
}

void TransformerLayer::attention_forward(Chain& chain, int layer, const std::string& prefix) {
  const std::string norm_stage = prefix.empty() ? "norm" : "recompute";
  const CollectiveOp gather = CollectiveOp::kAllGather;
  if (d_.sequence_parallel) tp_collective(chain, layer, Pass::kForward, "attn.allgather", gather, d_.tokens, prefix);
  for (const LinearShape& l : d_.attention_in) linear_forward(chain, layer, l, prefix);
  core_forward(chain, layer, prefix);
  linear_forward(chain, layer, d_.attention_out, prefix);
  tp_collective(chain, layer, Pass::kForward, d_.sequence_parallel ? "attn.reducescatter" : "attn.allreduce",
                d_.sequence_parallel ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, d_.tokens, prefix);
  // Dropout on the block's output and the residual add.
  const std::int64_t region = d_.region_tokens * d_.hidden;
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "attn.residual", norm_stage),
            e_.elementwise(2 * region, region, d_.dropout ? region : 0));
}

void TransformerLayer::mlp_block(Chain& chain, int layer, const std::string& prefix, bool norm) {
  if (norm) {
    const std::int64_t region = d_.region_tokens * d_.hidden;
    e_.kernel(chain, name(layer, Pass::kForward, prefix + "ln2", prefix.empty() ? "norm" : "recompute"),
              e_.elementwise(region, region));
  }
  const bool block_collectives = mlp_block_collectives(layer);
  if (d_.sequence_parallel && block_collectives)
    tp_collective(chain, layer, Pass::kForward, "mlp.allgather", CollectiveOp::kAllGather, d_.tokens, prefix);
  if (moe_layer(layer)) {
    moe_->forward(chain, layer, prefix);
  } else {
    linear_forward(chain, layer, d_.fc1, prefix);
    e_.kernel(chain, name(layer, Pass::kForward, prefix + "act", prefix.empty() ? "act" : "recompute"),
              e_.elementwise(d_.tokens * d_.fc1.out, d_.tokens * d_.ffn));
    linear_forward(chain, layer, d_.fc2, prefix);
  }
  if (block_collectives)
    tp_collective(chain, layer, Pass::kForward, d_.sequence_parallel ? "mlp.reducescatter" : "mlp.allreduce",
                  d_.sequence_parallel ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, d_.tokens, prefix);
}

void TransformerLayer::mlp_forward(Chain& chain, int layer, const std::string& prefix,
                                   const std::vector<BufferId>& frees) {
  mlp_block(chain, layer, prefix, true);
  const std::int64_t region = d_.region_tokens * d_.hidden;
  TaskName residual = name(layer, Pass::kForward, prefix + "mlp.residual", prefix.empty() ? "norm" : "recompute");
  residual.frees = frees;
  e_.kernel(chain, residual, e_.elementwise(2 * region, region, d_.dropout ? region : 0));
}

void TransformerLayer::forward(Chain& chain, int layer, const std::vector<BufferId>& allocates,
                               const std::string& prefix, const std::vector<BufferId>& frees) {
  const std::int64_t region = d_.region_tokens * d_.hidden;
  TaskName ln1 = name(layer, Pass::kForward, prefix + "ln1", prefix.empty() ? "norm" : "recompute");
  ln1.allocates = allocates;
  e_.kernel(chain, ln1, e_.elementwise(region, region));
  attention_forward(chain, layer, prefix);
  mlp_forward(chain, layer, prefix, frees);
}

void TransformerLayer::recompute_modules(Chain& chain, int layer, const RecomputeModules& modules,
                                         const std::vector<BufferId>& allocates) {
  const auto first = static_cast<TaskIndex>(e_.graph().num_tasks());
  const bool moe = moe_layer(layer);
  if (modules.layernorm) {
    // The norms that are modules of their own (sim/memory/activations.h, recomputable_norms).
    const std::int64_t region = d_.region_tokens * d_.hidden;
    const bool attention_norm = model_.architecture.attention.kind == AttentionKind::kMla;
    for (auto [norm, apart] : {std::pair{"recompute.ln1", attention_norm}, {"recompute.ln2", moe}}) {
      if (apart) e_.kernel(chain, name(layer, Pass::kBackward, norm, "recompute"), e_.elementwise(region, region));
    }
  }
  // MLA's up projections from the kept latents (and, without a query latent, q from the input),
  // which sequence parallelism keeps as the rank's shard: gathered again first, as the
  // column-parallel projections gather their input.
  if (modules.mla_up_proj) {
    std::vector<const LinearShape*> up;
    std::int64_t inputs = 0;
    for (const LinearShape& l : d_.attention_in) {
      if (l.name != "q_up" && l.name != "q" && l.name != "kv_up") continue;
      up.push_back(&l);
      inputs += l.in;
    }
    if (d_.sequence_parallel)
      tp_collective(chain, layer, Pass::kForward, "mla_up.allgather", CollectiveOp::kAllGather, d_.tokens,
                    "recompute.", inputs);
    for (const LinearShape* l : up) linear_forward(chain, layer, *l, "recompute.");
  }
  // With flash attention too: Megatron-Core checkpoints the core, whose kernel then runs again.
  if (modules.core_attn) core_forward(chain, layer, "recompute.");
  if (moe ? modules.moe : modules.mlp) {
    // The checkpointed MLP's forward from its input: a dense MLP's fused norm included, the MoE
    // layer's pre-MLP norm (a module of its own) not.
    mlp_block(chain, layer, "recompute.", !moe);
  } else if (moe) {
    if (modules.moe_act) moe_->recompute_act(chain, layer);
    if (modules.shared_experts) moe_->recompute_shared(chain, layer);
  }
  if (e_.graph().num_tasks() > first)
    for (BufferId b : allocates) e_.graph().allocate_at(first, b);
}

void TransformerLayer::mlp_backward(Chain& chain, int layer, BackwardPart part) {
  const std::int64_t region = d_.region_tokens * d_.hidden;
  const bool input = part != BackwardPart::kWeight;
  const bool block_collectives = mlp_block_collectives(layer);
  if (input) {
    e_.kernel(chain, name(layer, Pass::kBackward, "mlp.residual", "norm"),
              e_.elementwise(region, region, d_.dropout ? region : 0));
    if (d_.sequence_parallel && block_collectives)
      tp_collective(chain, layer, Pass::kBackward, "mlp.allgather", CollectiveOp::kAllGather, d_.tokens, "");
  }
  if (moe_layer(layer)) {
    moe_->backward(chain, layer, part);
  } else {
    linear_backward(chain, layer, d_.fc2, part, false);
    if (input)
      e_.kernel(chain, name(layer, Pass::kBackward, "act", "act"),
                e_.elementwise(d_.tokens * (d_.fc1.out + d_.ffn), d_.tokens * d_.fc1.out));
    linear_backward(chain, layer, d_.fc1, part, true);
  }
  if (input) {
    if (block_collectives)
      tp_collective(chain, layer, Pass::kBackward, d_.sequence_parallel ? "mlp.reducescatter" : "mlp.allreduce",
                    d_.sequence_parallel ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, d_.tokens, "");
    // The norm's backward, and the residual's gradient added to it.
    e_.kernel(chain, name(layer, Pass::kBackward, "ln2", "norm"), e_.elementwise(3 * region, region));
  }
}

void TransformerLayer::attention_backward(Chain& chain, int layer, BackwardPart part,
                                          const std::vector<BufferId>& last_wgrad_frees) {
  const std::int64_t region = d_.region_tokens * d_.hidden;
  const bool input = part != BackwardPart::kWeight;
  if (input) {
    e_.kernel(chain, name(layer, Pass::kBackward, "attn.residual", "norm"),
              e_.elementwise(region, region, d_.dropout ? region : 0));
    if (d_.sequence_parallel)
      tp_collective(chain, layer, Pass::kBackward, "attn.allgather", CollectiveOp::kAllGather, d_.tokens, "");
  }
  linear_backward(chain, layer, d_.attention_out, part, false);
  if (input) core_backward(chain, layer);
  for (auto it = d_.attention_in.rbegin(); it != d_.attention_in.rend(); ++it)
    linear_backward(chain, layer, *it, part, it + 1 == d_.attention_in.rend(),
                    it + 1 == d_.attention_in.rend() ? last_wgrad_frees : std::vector<BufferId>{});
  if (input)
    tp_collective(chain, layer, Pass::kBackward, d_.sequence_parallel ? "attn.reducescatter" : "attn.allreduce",
                  d_.sequence_parallel ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, d_.tokens, "");
}

void TransformerLayer::backward(Chain& chain, int layer, BackwardPart part, const std::vector<BufferId>& frees,
                                const std::vector<BufferId>& input_frees) {
  // The last task frees the layer's activations: ln1's backward, or, for the weight gradients
  // alone, the last weight gradient (their inputs are the kept activations; the compute stream
  // runs it after the others).
  mlp_backward(chain, layer, part);
  attention_backward(chain, layer, part, part == BackwardPart::kWeight ? frees : std::vector<BufferId>{});
  if (part == BackwardPart::kWeight) return;
  const std::int64_t region = d_.region_tokens * d_.hidden;
  TaskName ln1 = name(layer, Pass::kBackward, "ln1", "norm");
  if (part == BackwardPart::kAll) ln1.frees = frees;
  ln1.frees.insert(ln1.frees.end(), input_frees.begin(), input_frees.end());
  e_.kernel(chain, ln1, e_.elementwise(3 * region, region));
}

}  // namespace moesim
