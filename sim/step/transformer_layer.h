// The tasks of one transformer layer's passes for one microbatch on one pipeline stage (issue 23
// item 2): the attention block (norm, the input projections, the attention core, the output
// projection) and the dense MLP (norm, fc1, activation, fc2), with Megatron's tensor parallelism:
// column-parallel input projections and fc1, row-parallel output projection and fc2; without
// sequence parallelism an all-reduce after each row-parallel GEMM in forward and after each
// column-parallel GEMM's input gradient in backward; with it an all-gather before each block and
// a reduce-scatter after it, their transposes in backward, and the all-gather of the block's
// input again for the weight gradient, overlapped with the input-gradient GEMM (Korthikanti et
// al., MLSys 2023, section 4.2.2). Norms, dropouts and residual adds work on 1/tp of the tokens
// with sequence parallelism.
//
// The attention core: flash (one kernel; causal, so about half of the s x s products; backward
// recomputes the scores: 3 products of the query/key width and 2 of the value width against the
// forward's one each) or unfused (Megatron-LM 2021-22: a batched GEMM for the full s x s scores,
// a fused scale-mask-softmax kernel, dropout, a batched GEMM with V).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/spec/model_spec.h"
#include "sim/spec/step_spec.h"
#include "sim/step/step_emitter.h"

namespace moesim {
class MoeMlp;
}

namespace moesim {

// A GEMM of a linear layer on one rank: [tokens x in] x [in x out].
struct LinearShape {
  std::string name;
  std::int64_t in = 0;
  std::int64_t out = 0;
};

struct TransformerDims {
  std::int64_t tokens = 0;         // a microbatch's tokens on one rank (b x s / cp)
  std::int64_t region_tokens = 0;  // tokens of the norms and dropouts: tokens / tp with sequence parallelism
  std::int64_t hidden = 0;
  std::vector<LinearShape> attention_in;  // q/k/v (or MLA's down and up projections), per rank
  LinearShape attention_out;
  std::int64_t heads = 0;          // attention heads per rank
  std::int64_t qk_dim = 0;         // per head
  std::int64_t v_dim = 0;
  std::int64_t keys = 0;           // keys each query attends over before the causal mask (the sequence)
  std::int64_t kv_width = 0;       // per rank: the key and value columns a rank holds (both), per token
  int cp = 1;                      // context-parallel ranks: the core runs in cp blocks around a ring
  std::int64_t batch = 1;          // sequences of the microbatch
  LinearShape fc1, fc2;            // per rank; fc1's output is 2x wide when gated
  std::int64_t ffn = 0;            // the activation's output width per rank
  bool dropout = false;
  bool sequence_parallel = false;
  AttentionKernel kernel = AttentionKernel::kFlash;
};

TransformerDims transformer_dims(const ModelSpec& model, const StepShape& shape, const StepSpec& spec);

// What a backward emits: both gradients, or (zero-bubble schedules) the input gradients alone or
// the weight gradients alone.
enum class BackwardPart { kAll, kInput, kWeight };

class TransformerLayer {
 public:
  // `moe`: the MoE MLP of the model's MoE layers (null for a dense model); `model` tells which
  // layers are MoE.
  TransformerLayer(StepEmitter& emitter, const TransformerDims& dims, const ModelSpec& model, MoeMlp* moe)
      : e_(emitter), d_(dims), model_(model), moe_(moe) {}

  // The layer's forward; the first task allocates `allocates`, the last frees `frees`. `prefix`
  // "recompute." re-runs it (stage "recompute") before the backward of full recomputation.
  void forward(Chain& chain, int layer, const std::vector<BufferId>& allocates, const std::string& prefix = "",
               const std::vector<BufferId>& frees = {});
  // Re-runs what selective recomputation dropped, before the layer's backward: the norms that
  // are modules of their own (layernorm: MLA's input norm, an MoE layer's pre-MLP norm), MLA's up
  // projections (mla_up_proj), the attention core (core_attn, either kernel), and the MLP block's
  // whole forward (mlp for a dense layer, moe for an MoE layer) or, in an MoE layer, the routed
  // experts' activation (moe_act) and the shared experts (shared_experts). The first task
  // allocates `allocates`.
  void recompute_modules(Chain& chain, int layer, const RecomputeModules& modules,
                         const std::vector<BufferId>& allocates);
  // The layer's backward (or a part of it); the last task frees `frees`. The input gradients'
  // last task (ln1's backward) frees `input_frees` (ZeRO-3's gathered weights).
  void backward(Chain& chain, int layer, BackwardPart part, const std::vector<BufferId>& frees,
                const std::vector<BufferId>& input_frees = {});
  // The FP8 GEMMs of a layer's Transformer Engine modules (TE's num_gemms, which sizes their amax
  // histories): one per attention projection, proj, and the MLP's fc1 and fc2 (MoE: MoeMlp::fp8_gemms).
  int fp8_gemms(int layer) const;

 private:
  TaskName name(int layer, Pass pass, const std::string& what, const std::string& stage) const;
  // A collective over the tensor-parallel group of `tokens` rows `width` wide (0: d_model).
  void tp_collective(Chain& chain, int layer, Pass pass, const std::string& what, CollectiveOp op,
                     std::int64_t tokens, const std::string& prefix, std::int64_t width = 0);
  void linear_forward(Chain& chain, int layer, const LinearShape& l, const std::string& prefix);
  void linear_backward(Chain& chain, int layer, const LinearShape& l, BackwardPart part, bool gathered_input,
                       const std::vector<BufferId>& wgrad_frees = {});
  // Current scaling's amax of a linear layer's input and output gradient, as Megatron-Core's
  // Transformer Engine layer spec builds the layers: the layer norm's kernel returns the input's for
  // the layers it feeds (TELayerNormColumnParallelLinear: qkv, the dense fc1, and MLA's q_up and
  // kv_up after their latents' norms, qk_layernorm); with sequence parallelism the column-parallel
  // layers' inputs (not proj, fc2, nor MLA's replicated down projections) and the row-parallel
  // layers' (proj, fc2) output gradients are reduced over the tensor-parallel group.
  Fp8Amax input_amax(int stage, const LinearShape& l) const;
  Fp8Amax grad_amax(int stage, const LinearShape& l) const;
  void core_forward(Chain& chain, int layer, const std::string& prefix, const std::vector<BufferId>& allocates = {});
  // Flash attention with context parallelism (Megatron-Core's ring attention): the core in cp
  // blocks, block j > 0 on the keys and values that the j-th step of the ring brought.
  void ring_core(Chain& chain, int layer, Pass pass, const std::string& prefix, const std::vector<BufferId>& allocates);
  void core_backward(Chain& chain, int layer);
  void attention_forward(Chain& chain, int layer, const std::string& prefix);
  void mlp_forward(Chain& chain, int layer, const std::string& prefix, const std::vector<BufferId>& frees = {});
  // The MLP block from its (norm's) input to its reduced output, without the residual add.
  void mlp_block(Chain& chain, int layer, const std::string& prefix, bool norm);
  void attention_backward(Chain& chain, int layer, BackwardPart part, const std::vector<BufferId>& last_wgrad_frees);
  void mlp_backward(Chain& chain, int layer, BackwardPart part);

  bool moe_layer(int layer) const;
  // The MLP block's tensor-parallel all-gather and reduction: not around an MoE MLP whose ranks
  // route their own shard (MoeMlp::own_shard) and whose shared experts gather their input themselves.
  bool mlp_block_collectives(int layer) const;

  StepEmitter& e_;
  const TransformerDims& d_;
  const ModelSpec& model_;
  MoeMlp* moe_;
};

}  // namespace moesim
