// Activation memory of a whole-network model (sim/spec/model_architecture.h): the bytes each
// transformer layer keeps from its forward until its backward, per microbatch and GPU, and what
// the first and last pipeline stages keep besides (issue 23 item 6). The step simulator allocates
// a layer's kept bytes at its forward and frees them after its backward; a stage's peak is these
// bytes times its in-flight microbatches (stage_activations below gives that closed form).
//
// The accounting is Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
// Models" (MLSys 2023, arXiv:2205.05198, section 4), tensor by tensor, generalised to the models
// moesim describes; docs/models.md ("Activation memory") tables every tensor with its size. For a
// GPT with LayerNorm, a GELU MLP of 4h, dropout, fp16 and unfused attention it reproduces the
// paper's sbh(34 + 5as/h) per layer, sbh(10 + 24/t + 5as/(ht)) with tensor parallelism,
// sbh/t (34 + 5as/h) with sequence parallelism, 34 sbh/t with selective recomputation and
// 2sbh/t with full recomputation (tests/sim/memory/activations_test.cc).
//
// The rules, in short (N = b s / cp tokens of a rank's sequence chunk, e = the model dtype's bytes):
//   - a tensor over the tokens at width d_model (norm inputs, the inputs of the QKV / MLA down /
//     fc1 / router GEMMs, dropout masks) is replicated over the t tensor-parallel ranks, and split
//     over them with sequence parallelism; a tensor over heads or MLP columns is split over t;
//   - dropout masks are 1 byte an element and exist only with architecture.dropout > 0;
//   - norms keep their input (LayerNorm and RMSNorm alike); their per-token statistics (fp32 mean
//     and rstd, 8 bytes a token against thousands) are left out, as the paper does;
//   - unfused attention keeps the s x s softmax output, and with dropout its mask and output;
//     flash attention keeps q, k, v, its output and the fp32 softmax statistics (b heads s / t);
//   - an MoE layer's experts see rows = E x C with the simulator's capacity C = floor(k f N / E)
//     (sim/build/layer_dims.cc; uniform routing fills every expert to C, so ep does not change a
//     rank's rows); where each rank routes its own shard (tp > 1 with sequence parallelism, or
//     etp != t: Megatron-Core's dispatcher) etp x E x C(N / t) rows, the etp ranks' own tokens
//     gathered; otherwise N is the tensor-parallel group's tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/schedule/pipeline_schedule.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/step_spec.h"

namespace moesim {

struct ActivationLayout {
  std::int64_t micro_batch = 1;    // b
  std::int64_t seq = 0;            // s, tokens of one sequence; 0: the model's architecture.seq_len
  int tp = 1;                      // t
  int cp = 1;                      // context parallelism: each rank holds s / cp of the sequence
  int etp = 0;                     // the experts' tensor-parallel size; 0: t
  bool sequence_parallel = false;  // Megatron's SP: the d_model-wide tensors split over t
  Recompute recompute = Recompute::kNone;
  AttentionKernel attention = AttentionKernel::kFlash;
  // s1-s4 (StepSpec::moe_strategy): the MoE MLP keeps neither T_DI (its experts' dispatched input
  // rows) nor T_M (their hidden columns); moe_restored_bytes gives what the backward restores.
  MemoryStrategy moe_strategy = MemoryStrategy::kNone;
  RecomputeModules modules;  // with Recompute::kSelective: what it drops and re-runs
};

// The bytes of an MoE layer's T_DI (the rows dispatched to the rank's experts, d_model wide) and
// T_M (the experts' hidden columns the backward reads: fc1's output and the activation's), per
// microbatch: what strategies s1-s4 do not keep and restore in the backward.
struct MoeReusedTensors {
  std::int64_t t_di = 0;
  std::int64_t t_m = 0;
  std::int64_t t_m_activation = 0;  // of t_m, the activation's output (what weight gradients read)
};
MoeReusedTensors moe_reused_tensors(const ModelSpec& model, const ActivationLayout& layout);

struct LayerActivations {
  // Kept from the layer's forward until its backward, per microbatch, per GPU.
  std::int64_t kept_bytes = 0;
  // Re-created in the layer's backward by recomputation and freed during it (full: the whole
  // layer's tensors but its input; selective: what the modules named drop, StepSpec's
  // RecomputeModules); 0 without recomputation.
  std::int64_t recompute_bytes = 0;
};

// A layer of attention and a dense MLP of width architecture.dense_d_ffn. Throws InputError for a
// model without an architecture section or a layout it does not divide (t not dividing the heads,
// key/value groups or MLP widths; cp not dividing s; with SP, t not dividing s / cp; context
// parallelism with unfused attention, which Megatron-LM runs only with fused attention kernels).
LayerActivations dense_layer_activations(const ModelSpec& model, const ActivationLayout& layout);

// A layer of attention and the MoE MLP: router, the routed top-k experts at the model's capacity
// factor, the shared experts (a dense MLP of count x their d_ffn). ep must divide the experts.
LayerActivations moe_layer_activations(const ModelSpec& model, const ActivationLayout& layout, int ep);

// Layer `layer` (0-based), dense or MoE as the model's layer pattern says.
LayerActivations layer_activations(const ModelSpec& model, const ActivationLayout& layout, int ep, int layer);

// What the first stage keeps for the input embedding: the int64 token ids (Megatron-LM's
// theoretical_memory_usage.py counts them) and, with dropout, the embedding dropout's mask
// (Korthikanti section 4.3: sbh/t with SP).
std::int64_t embedding_activations(const ModelSpec& model, const ActivationLayout& layout);

// What the head's stage (the last; DualPipeV's first) keeps for the final norm (its input), the output layer (its input) and the
// cross-entropy (fp32 logits, the vocabulary split over t): Korthikanti section 4.3's
// 4sbh/t (1 + v/h) for fp16 with SP. Multi-token prediction modules are in mtp_activations.
std::int64_t output_activations(const ModelSpec& model, const ActivationLayout& layout);

// One multi-token prediction module's tensors outside its transformer layer (DeepSeek-V3, section
// 2.2): the inputs of its two norms (the previous depth's hidden state, the shifted tokens'
// embedding), its projection's input (their concatenation, 2h), and its own final norm, output
// layer and cross-entropy as output_activations counts them.
std::int64_t mtp_activations(const ModelSpec& model, const ActivationLayout& layout);

// The layer norms of a layer that Megatron-Core's layernorm recompute module re-runs: those that
// are modules of their own. Its Transformer Engine layer spec fuses a norm into the linear layer
// after it (TELayerNormColumnParallelLinear, which keeps the norm's output itself) for the
// attention's QKV projection and a dense MLP's fc1; MLA's input norm (before its down
// projections) and an MoE layer's pre-MLP norm (before the router and the experts) stay apart.
int recomputable_norms(const ModelSpec& model, bool moe_layer);

struct PipelineLayout {
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int stages = 1;          // p
  int virtual_stages = 1;  // v: model chunks per stage (interleaved only)
  int microbatches = 1;    // m: per step, per pipeline
  // Layers of each model part in forward order (StepSpec::part_layers); empty: an even split.
  std::vector<int> part_layers;
  // Megatron-Core's combined 1F1B (StepSpec::overlap_moe_ep_comm; 1f1b with one stage, or
  // interleaved): one more warmup forward, then each steady forward launched with a backward.
  bool combined_1f1b = false;
};

struct StageActivations {
  std::int64_t kept_bytes = 0;       // every in-flight microbatch's kept tensors at the stage's peak
  std::int64_t recompute_bytes = 0;  // the largest layer's recompute bytes, alive during its backward
  std::int64_t in_flight = 0;        // microbatch passes through one of the stage's chunks in flight
  std::int64_t bytes() const { return kept_bytes + recompute_bytes; }
};

// The closed-form activation peak of pipeline stage `stage`: its chunks' layers (and the
// embedding on the model's first part, the output extras and MTP modules on its last) times the
// passes in flight at the end of the schedule's warm-up:
//   - GPipe: all m microbatches (every forward runs before the first backward);
//   - 1F1B: min(p - stage, m) (Narayanan et al., SC21);
//   - zero-bubble H1 and DualPipe: what the stage's program holds from each forward to its last
//     backward pass (W where the backward is split): ZB-H1's deferred W passes keep min(p, m)
//     microbatches on every stage, since the step keeps a layer's activations whole until its W
//     (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, count only what W reads there,
//     for a peak no higher than 1F1B's); DualPipe p + 1 chunks;
//   - interleaved: Megatron-LM's warm-up of 2(p - stage - 1) + (v - 1)p chunk forwards plus the
//     first steady one, taking chunks in groups of p microbatches; for stage 0 that is
//     L (1 + (p - 1)/(pv)) layers' worth (Korthikanti section 4.2.3);
//   - combined 1F1B (PipelineLayout::combined_1f1b): one pass more than its schedule's (at most
//     every pass): the extra warmup forward keeps the schedule's count before the first pair, whose
//     forward allocates while the backward launched with it frees (interleaved with it, so the
//     simulated peak stays below this bound, by up to a pass less a few layers);
//   - ZB-H1, DualPipe and DualPipeV: the stage's program walked pass by pass, each microbatch's
//     chunk holding its kept bytes from its forward to its last backward pass and, with a split
//     backward and recomputation, what its B pass re-created until its W pass; the largest sum
//     (kept_bytes) and the passes in flight then, plus one layer's recompute bytes (the transient
//     of the pass being recomputed).
// Stage 0 of 1F1B thus holds L layers' worth for any p (Korthikanti sections 4.2.3 and 4.3). The layers
// are split over the p x v model parts as part_layers gives them, or evenly (the parts must then
// divide them), as the step's shape splits them; MTP modules count as layers of the last layer's kind on the last part.
StageActivations stage_activations(const ModelSpec& model, const ActivationLayout& layout, int ep,
                                   const PipelineLayout& pipeline, int stage);

}  // namespace moesim
