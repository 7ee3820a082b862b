// StepSpec: a whole training step of a whole-network model (issue 23): the parallel layout over
// the cluster's GPUs, the batch, the pipeline schedule, recomputation and sequence parallelism.
// `moesim simulate --global-batch ...` builds one; sim/step simulates it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/schedule/pipeline_schedule.h"
#include "sim/spec/routing_spec.h"
#include "sim/spec/types.h"

namespace moesim {

// Activation recomputation (Korthikanti et al., MLSys 2023): none keeps every activation of a
// layer for its backward; selective drops the attention core's (QK^T, softmax, dropout, attention
// over V) and re-runs that core in backward; full keeps only each layer's input and re-runs the
// layer's forward before its backward.
enum class Recompute { kNone, kSelective, kFull };
std::string_view to_string(Recompute r);
std::optional<Recompute> parse_recompute(std::string_view s);
std::vector<std::string> recompute_names();

// The modules selective recomputation drops in forward and re-runs before the layer's backward,
// named as Megatron-Core's --recompute-modules names them. Output-discarding (only the module's
// output is dropped): layernorm (the outputs of the norms that are modules of their own: MLA's
// input norm and an MoE layer's pre-MLP norm; Transformer Engine fuses the others into the next
// linear layer; sim/memory/activations.h), moe_act (the routed experts' activation output, fc2's
// input) and mla_up_proj (MLA's up projections and rotary embedding: q, k and v, the core's
// inputs). Checkpointed (the module keeps its input and nothing inside; its forward, collectives
// included, runs again): core_attn (the attention core, the default and Korthikanti et al.'s
// selective recomputation), mlp (a dense layer's MLP, its fused norm included), moe (an MoE
// layer's MLP: router, dispatch, experts, combine, shared experts) and shared_experts.
struct RecomputeModules {
  bool core_attn = true;
  bool layernorm = false;
  bool moe_act = false;
  bool mla_up_proj = false;
  bool mlp = false;
  bool moe = false;
  bool shared_experts = false;
  bool operator==(const RecomputeModules&) const = default;
};
// "layernorm,moe_act" -> the modules (none of them unless named); nullopt for an unknown name or
// an empty list, with `error` saying which.
std::optional<RecomputeModules> parse_recompute_modules(std::string_view list, std::string& error);
std::string to_string(const RecomputeModules& m);  // "core_attn,layernorm"
std::vector<std::string> recompute_module_names();

// How the attention core runs: flash (FlashAttention: one fused kernel, no s x s tensor kept, the
// softmax statistics instead) or unfused (Megatron-LM of 2021-22: a batched GEMM for QK^T, a
// fused scale-mask-softmax kernel, dropout, a batched GEMM with V; the s x s scores, softmax
// output and dropout mask are kept for backward).
enum class AttentionKernel { kFlash, kUnfused };
std::string_view to_string(AttentionKernel a);
std::optional<AttentionKernel> parse_attention_kernel(std::string_view s);
std::vector<std::string> attention_kernel_names();

// FP8's scaling recipe (--fp8-recipe; Transformer Engine's per-tensor FP8 recipes, as Megatron-Core
// runs them): current scaling (Float8CurrentScaling, Megatron-Bridge's "FP8-CS") computes each
// tensor's absolute maximum (amax) just before its cast; delayed scaling (DelayedScaling) casts
// with a scale from an amax history and updates the histories after every forward and backward
// of a model chunk. sim/step/fp8_scaling.h emits what each does.
enum class Fp8Recipe { kCurrent, kDelayed };
std::string_view to_string(Fp8Recipe r);
std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view s);
std::vector<std::string> fp8_recipe_names();

// How an MoE layer's tokens reach their experts (--dispatcher): Megatron-Core's all-to-all
// dispatcher (one row per token and expert, NCCL's all-to-all over the expert group), or DeepEP's
// normal kernels (Megatron-Core's flex dispatcher; HybridEP moves the same bytes): each token once
// per destination node over RDMA, then once per destination GPU over NVLink
// (sim/step/dedup_dispatch.h).
enum class TokenDispatcher { kAllToAll, kDeepEp };
std::string_view to_string(TokenDispatcher d);
std::optional<TokenDispatcher> parse_token_dispatcher(std::string_view s);
std::vector<std::string> token_dispatcher_names();

// Whether each rank of an MoE layer routes only its own tokens, as Megatron-Core's all-to-all
// dispatcher does: with the experts' own tensor-parallel size (etp != tp), and with tensor
// parallelism under sequence parallelism, where a rank holds its shard of the sequence (the
// dispatched rows are then all-gathered over the experts' tensor-parallel group). Otherwise (tp 1,
// or tp > 1 without sequence parallelism, which Megatron-Core refuses for MoE in training) every
// rank routes the tensor-parallel group's tokens. The one rule for the step and the closed form.
inline bool routes_own_shard(int tp, int etp, bool sequence_parallel) {
  return etp != tp || (tp > 1 && sequence_parallel);
}

// The parallel layout of a step over G GPUs, Megatron-Core's rank order tp-cp-ep-dp-pp (tensor
// fastest): G = tp x cp x dp x pp, where dp is the data-parallel size of the dense blocks. The MoE
// layers have their own layout over the same ranks of a stage (Megatron-Core's expert rank
// generator, order tp-ep-dp-pp: "MoE parallel folding", Liu et al. 2025, arXiv 2504.14960):
// etp x ep x edp = tp x cp x dp, the experts' tensor-parallel ranks fastest. With etp = tp (the
// default, --expert-tensor-parallel-size unset) the expert-parallel group lies inside cp x dp, so
// ep must divide cp x dp and the expert blocks are replicated over cp x dp / ep ranks.
struct StepLayout {
  int gpus = 0;
  int tp = 1;
  int pp = 1;
  int vpp = 1;  // virtual pipeline stages (model chunks per pipeline stage)
  int ep = 1;
  int cp = 1;
  int etp = 0;  // the experts' tensor-parallel size (--etp); 0: tp
  int dp() const { return gpus / (tp * cp * pp); }
  int stage_size() const { return tp * cp * dp(); }  // GPUs of one pipeline stage
  int expert_tp() const { return etp > 0 ? etp : tp; }
  // The experts' data-parallel size (their replicas in a stage): stage_size / (etp x ep).
  int edp() const { return stage_size() / (expert_tp() * ep); }
  // The MoE layers run with their own layout (etp differs from tp).
  bool folded() const { return expert_tp() != tp; }
  // moesim::routes_own_shard for this layout.
  bool routes_own_shard(bool sequence_parallel) const {
    return moesim::routes_own_shard(tp, expert_tp(), sequence_parallel);
  }
};

// "host launches X us each" for a host launch time (StepSpec::host_launch_ns), as the step's and
// the layout plan's headers print it.
std::string host_launch_phrase(std::int64_t launch_ns);

struct StepSpec {
  StepLayout layout;
  std::int64_t global_batch = 0;  // sequences per step, over every data-parallel replica
  std::int64_t micro_batch = 1;   // sequences per microbatch
  std::int64_t seq = 0;           // tokens per sequence; 0: the model's architecture.seq_len
  std::optional<PipelineSchedule> schedule;  // unset: 1f1b, or interleaved with vpp > 1
  // Layers of each model part (pp x vpp of them, in forward order), for a split the parts do not
  // divide evenly (DeepSeek-V3's 61 layers); empty: an even split.
  std::vector<int> part_layers;
  Recompute recompute = Recompute::kNone;
  RecomputeModules recompute_modules;  // with Recompute::kSelective: what it re-runs
  bool sequence_parallel = false;
  AttentionKernel attention = AttentionKernel::kFlash;
  DType gemm_precision = DType::kBf16;  // bf16 or fp8 (the GEMMs' math; tensors stay in the model's dtype)
  Fp8Recipe fp8_recipe = Fp8Recipe::kCurrent;  // with fp8: the scaling recipe (the H100 rows' FP8-CS)
  int zero_stage = 0;                   // 1: Megatron's distributed optimizer
  // Reduce each layer's gradients over the data-parallel group as soon as the last microbatch's
  // backward has produced them, overlapped with the rest of the backward (Megatron-Core's
  // overlap_grad_reduce, one bucket per layer); false: one reduction per stage after the backward.
  bool overlap_grad_reduce = true;
  // MoE sub-stage pipelining (--chunks): each microbatch's dispatch, experts and combine in this
  // many chunks of its rows (sim/step/moe_mlp.h); 1 runs them whole.
  int moe_chunks = 1;
  // MPipeMoE's memory reuse in the step's MoE layers (--strategy, sim/step/moe_reuse.h): s1-s4 keep
  // neither the experts' dispatched input T_DI nor their hidden columns T_M from a microbatch's
  // forward to its backward, and restore them per chunk before the experts' backward (offload to
  // the host and prefetch, re-dispatch, or recompute). none keeps both.
  MemoryStrategy moe_strategy = MemoryStrategy::kNone;
  // How the routers spread tokens over the experts (--routing): uniform, or a routing plan whose
  // most loaded expert-parallel rank the MoE layers wait for (sim/step/moe_routing.h); `seed`
  // (--seed) places zipf's hot experts.
  RoutingSpec routing;
  std::uint64_t seed = 1;
  // Host time to launch each kernel, copy or collective (--host-launch-us), and the host's waits
  // for the values it reads (sim/engine/host_issue.h); unset: the host is not modelled.
  std::optional<std::int64_t> host_launch_ns;
  // The MoE layers' token dispatcher (--dispatcher).
  TokenDispatcher dispatcher = TokenDispatcher::kAllToAll;
  // Megatron-Core's overlap_moe_expert_parallel_comm (--overlap-moe-expert-parallel-comm): its
  // combined 1F1B schedule, each steady-state forward overlapped with the backward of an earlier
  // microbatch (sim/schedule/pipeline_schedule.h combined_1f1b_programs).
  bool overlap_moe_ep_comm = false;
  // Megatron-LM's --use-tp-pp-dp-mapping: ranks in the order tp-cp-pp-dp (the experts' tp-ep-pp-dp),
  // a pipeline's stages next to each other and the data-parallel replicas outermost, instead of
  // Megatron-Core's default tp-cp-ep-dp-pp (sim/step/step_shape.h).
  bool tp_pp_dp_mapping = false;

  PipelineSchedule effective_schedule() const {
    return schedule ? *schedule : (layout.vpp > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::kOneFOneB);
  }
};

}  // namespace moesim
