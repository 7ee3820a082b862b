// The MoE MLP of a transformer layer for one microbatch on one pipeline stage. Two ways:
//
// Each rank routes its own tokens (MoeDims::own_shard; StepLayout::routes_own_shard: tp > 1 with
// sequence parallelism, or the experts' own tensor-parallel size etp != tp, Megatron-Core's
// parallel folding, Liu et al. 2025, arXiv 2504.14960), as Megatron-Core's
// MoEAlltoAllTokenDispatcher does (megatron/core/transformer/moe/token_dispatcher.py,
// NVIDIA/Megatron-LM d98e8a6): no all-gather of the block input; each rank routes its own N / tp
// tokens (its sequence-parallel shard), the all-to-all runs over the expert-parallel group (ep
// ranks strided by etp), then an all-gather over the experts' tensor-parallel group (etp
// consecutive ranks; the tensor-parallel group when etp = tp) gives each local expert ep x etp x
// C rows, whose columns split over etp; after the experts a reduce-scatter over the same group,
// the combine all-to-all, and the rank's own N / tp tokens come out. The shared experts stay a
// tensor-parallel MLP over tp (SharedExpertMLP): their own all-gather and reduce-scatter of the
// block's N tokens, beside the dispatch.
//
// Otherwise (tp 1, or tp > 1 without sequence parallelism, which Megatron-Core refuses for MoE
// layers in training): between the block's tensor-parallel all-gather and its reduce-scatter or
// all-reduce each rank of a tensor-parallel group holds the group's N tokens; it routes them
// (router GEMM, top-k), permutes its k x N choices into expert order, sends them over the
// expert-parallel group (StepShape::expert_group), runs its E / ep local experts as batched GEMMs
// with the experts' columns split over the tensor-parallel ranks, sends the rows back and
// un-permutes them into partial sums that the block's reduction adds up. Shared experts are a
// tensor-parallel dense MLP on the same N tokens, issued after the dispatch so that they run
// while it is in flight (Megatron-Core's shared-expert overlap); their partial sums join the same
// reduction.
//
// Uniform routing: every source rank sends C = floor(k f N / E) rows to every expert (f the
// capacity factor; dropless models have f = 1), so every local expert gets ep x C rows. Any other
// --routing: the rows of a routing plan's most loaded rank, and all-to-allv (moe_routing.h).
//
// Sub-stage pipelining (--chunks n, PipeMoE/MPipeMoE, as sim/build's MoE layer runs it): each
// microbatch's dispatch, experts and combine are cut into n chunks along the rows, C split as
// evenly as integers allow (sim/build/layer_dims.h without alignment: chunk c carries floor(C/n)
// rows per (source rank, expert), one more for the first C mod n chunks). Every dispatch is issued
// at once on comm.dispatch, the chunks' experts run in order on the compute stream, each chunk's
// combine on comm.combine after its fc2 (MPipeMoE's forward order): chunk i+1's dispatch runs
// under chunk i's GEMMs and chunk i's combine under the later chunks'. Backward mirrors it: the
// combine gradients' all-to-alls on comm.dispatch, the experts' input (and weight) gradients per
// chunk, the dispatch gradients' on comm.combine. The router, permutation, un-permutation and
// shared experts stay whole; so do the weight gradients of a split backward (zb-h1, dualpipe: the
// W pass has no all-to-all to hide, so it runs one batched GEMM per layer over all rows). n = 1
// is the unchunked layer, task for task.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sim/spec/model_spec.h"
#include "sim/step/dedup_dispatch.h"
#include "sim/step/moe_dispatcher.h"
#include "sim/step/moe_routing.h"
#include "sim/step/step_emitter.h"
#include "sim/step/transformer_layer.h"

namespace moesim {

struct MoeDims {
  std::int64_t tokens = 0;          // tokens routed on the rank: the tensor-parallel group's N (own_shard: N / tp)
  std::int64_t shared_tokens = 0;   // the shared experts' tokens: N
  std::int64_t hidden = 0;
  int experts = 0;                  // E
  int local_experts = 0;            // E / ep
  int top_k = 1;
  std::int64_t capacity = 0;        // C: rows per (source rank, expert)
  bool own_shard = false;           // each rank routes its own tokens (StepLayout::routes_own_shard)
  int gathered = 1;                 // the experts' all-gather multiplies the rows (own_shard: etp)
  std::int64_t expert_ffn = 0;      // the activation's output width per rank (d_ffn / etp)
  std::int64_t expert_fc1_out = 0;  // fc1's output per rank (2x for gated)
  std::int64_t expert_kept_cols = 0;  // T_M's width: the columns the experts' backward reads
  MemoryStrategy strategy = MemoryStrategy::kNone;  // s1-s4: T_DI and T_M restored (moe_mlp_reuse.cc)
  std::int64_t shared_ffn = 0;      // shared experts' activation width per rank (count x d_ffn / tp); 0 = none
  std::int64_t shared_fc1_out = 0;
  int chunks = 1;                   // n: the sub-stage pipelining's chunks (StepSpec::moe_chunks)
  // An imbalanced routing (moe_routing.h): the rows of the group's most loaded rank; null: uniform.
  std::shared_ptr<const MoeRouting> routing;
  bool sequence_parallel = false;   // the shared experts' FP8 amax reductions (StepSpec::sequence_parallel)
  TokenDispatcher dispatcher = TokenDispatcher::kAllToAll;  // StepSpec::dispatcher
  std::optional<ModelSpec::RouterGroups> router_groups;     // ModelSpec::router_groups

  // kWhole: the microbatch's rows, all chunks together.
  static constexpr int kWhole = -1;
  // Rows per (source rank, expert) in chunk c: floor(C/n), one more for the first C mod n chunks.
  std::int64_t chunk_capacity(int c = kWhole) const;
  // Rows the rank sends (uniform: C to each of the E experts).
  std::int64_t rows_sent(int c = kWhole) const;
  // A local expert's rows: from each of the ep ranks, gathered over etp with own_shard (routed: the
  // rank's rows spread evenly over its local experts, rounded up).
  std::int64_t rows_per_local_expert(int ep, int c = kWhole) const;
  // The local experts' rows together.
  std::int64_t local_rows(int ep, int c = kWhole) const;
};

// `chunks`: StepSpec::moe_chunks, checked by check_moe_chunks.
MoeDims moe_dims(const ModelSpec& model, const StepShape& shape, int chunks, bool sequence_parallel);

// moe_dims with the step's --chunks and its routing (StepSpec::routing): the plan is made once, for
// every MoE layer of the step. Throws InputError naming --routing for a matrix that does not fit.
MoeDims step_moe_dims(const ModelSpec& model, const StepShape& shape, const StepSpec& spec);

// --chunks n: at least 1, and for n > 1 a model with MoE layers whose capacity C (rows per source
// rank and expert in a microbatch) is at least n, so that no chunk is empty. Throws InputError
// naming --chunks and the rule.
void check_moe_chunks(const ModelSpec& model, const StepShape& shape, int chunks, bool sequence_parallel);

class MoeMlp {
 public:
  MoeMlp(StepEmitter& emitter, const MoeDims& dims) : e_(emitter), d_(dims), dispatcher_(emitter, dims) {}

  // From the gathered block input to the partial sums the block's reduction adds (own_shard: from
  // the rank's shard of the block input to its shard of the output, no block collectives).
  void forward(Chain& chain, int layer, const std::string& prefix);
  bool own_shard() const { return d_.own_shard; }
  // FP8 GEMMs of the MLP's Transformer Engine modules: the shared experts' fc1 and fc2, and a
  // grouped linear per fc whose num_gemms is the local experts' count (TE GroupedLinear).
  int fp8_gemms() const { return (d_.shared_ffn > 0 ? 2 : 0) + 2 * d_.local_experts; }
  void backward(Chain& chain, int layer, BackwardPart part);
  // Selective recomputation's moe_act: the routed experts' activation over all the microbatch's
  // rows on the rank, again, before the layer's backward.
  void recompute_act(Chain& chain, int layer);
  // Selective recomputation's shared_experts: their forward from the block's input, as
  // Megatron-Core's checkpointed SharedExpertMLP runs it: with a sequence-parallel (or folded, own_shard)
  // input its own all-gather before fc1 and reduce-scatter after fc2, with tensor parallelism
  // alone an all-reduce after fc2 (the block's reduction in the first forward).
  void recompute_shared(Chain& chain, int layer);

 private:
  // `kernel`: which memory-bound kernel an elementwise task is (op.h), as the single-layer MoE
  // block names them: top-k, the permutation (encode), the un-permutation (decode), activation.
  TaskName name(int layer, Pass pass, const std::string& what, const std::string& stage,
                Op kernel = Op::kElementwise) const {
    return TaskName{"L" + std::to_string(layer), layer, pass, what, stage, {}, {}, kernel};
  }
  // A chunk's id suffix: ".c<c>" with n > 1, none for the whole rows or n = 1.
  std::string suffix(int c) const { return d_.chunks > 1 && c != MoeDims::kWhole ? ".c" + std::to_string(c) : ""; }
  // `to_experts`: the dispatch's direction (the forward dispatch, the combine's gradient). Chunk
  // c's rows, on a copy of `chain`: returns the all-to-all (the chain's last task for a group of one).
  std::optional<TaskIndex> all_to_all(const Chain& chain, int layer, Pass pass, const std::string& what,
                                      bool to_experts, const std::string& prefix, int c);
  // DeepEP's exchange for one all-to-all of all_to_all (sim/step/dedup_dispatch.h): one
  // all-to-allv whose traffic is both hops, RDMA across nodes and NVLink within each, moving at
  // once (DeepEP forwards chunk by chunk); the same matrix back (`to_experts` false).
  std::optional<TaskIndex> dedup_all_to_all(const Chain& chain, const TaskName& task, StreamClass stream,
                                            bool to_experts, int c);
  // That matrix for chunk c over `group` (the stage's expert group, sorted).
  std::shared_ptr<const TrafficMatrix> dedup_traffic(const std::vector<int>& group, int c) const;

  // Every chunk's all-to-all toward the experts, each after the chain's last task (and after
  // `host_wait`, the dispatcher's split sizes on the host), in forward with the chunk's routing
  // probabilities after it. Returns each chunk's last task.
  std::vector<std::optional<TaskIndex>> to_experts(const Chain& chain, int layer, Pass pass, const std::string& what,
                                                   const std::string& prefix, std::optional<TaskIndex> host_wait);
  // Chunk c's rows sent (the probabilities' all-to-all) and id suffix.
  ChunkRows rows_of(int c) const {
    return {d_.rows_sent(c), suffix(c), d_.routing ? d_.routing->probs_traffic.at(static_cast<std::size_t>(c)) : nullptr};
  }
  // Chunk c's rows the local experts hold (gathered over etp with own_shard: the dispatcher's sorts;
  // uniform: E x C x etp, what every rank sends).
  ChunkRows gathered_rows_of(int c) const { return {d_.local_rows(e_.shape().layout.ep, c), suffix(c)}; }
  // The chain's last task (the un-permutation, which reads every chunk's rows) after each chunk's
  // all-to-all back (`back`; the chain went on from the last of them).
  void after_chunks(const Chain& chain, const std::vector<std::optional<TaskIndex>>& back);
  // The shared experts' GEMMs and activation; `gather`: their own all-gather of the input and
  // reduce-scatter of the output around them.
  void shared_forward(Chain& chain, int layer, const std::string& prefix, bool gather);
  // Returns fc1's task (the last reader of the chunk's dispatched rows T_DI).
  TaskIndex experts_forward(Chain& chain, int layer, const std::string& prefix, int c);
  // Folded layout: a collective of `rows` rows over the experts' tensor-parallel group, or of the
  // shared experts' tokens over the tensor-parallel group (tasks named <what>, report stage tp).
  void expert_tp_collective(Chain& chain, int layer, Pass pass, const std::string& what, CollectiveOp op,
                            std::int64_t rows, const std::string& prefix);
  void shared_tp_collective(Chain& chain, int layer, Pass pass, const std::string& what, CollectiveOp op,
                            const std::string& prefix);
  // FP8 (--precision fp8), before a GEMM of `what`: its input quantised, and in the step's first
  // microbatch its weights (cached for the others); in backward its output gradient. Current
  // scaling: the amax in a pass of its own, reduced over the tensor-parallel group with sequence
  // parallelism for the shared experts' fc1 input and fc2 gradient (column- and row-parallel TE
  // linears); the routed experts' grouped linears reduce none (Megatron-Core runs them without a
  // tensor-parallel mode: explicit expert communication).
  void fp8_input(Chain& chain, int layer, const std::string& what, std::int64_t weight_elems,
                 std::int64_t input_elems, const std::string& prefix, const std::string& chunk = "");
  void fp8_grad(Chain& chain, int layer, const std::string& what, std::int64_t elems, const std::string& chunk);
  struct FfnBackward {
    std::string what;             // "shared" or "experts": task names and the report's stage
    std::string chunk;            // the chunk's id suffix (MoeMlp::suffix)
    std::int64_t batch = 1;       // GEMMs per launch
    std::int64_t gemm_rows = 0;   // rows of each
    std::int64_t act_rows = 0;    // rows the activation's backward reads
    std::int64_t ffn = 0;         // fc2's input width
    std::int64_t fc1_out = 0;     // fc1's output width (2 ffn when gated)
  };
  void ffn_backward(Chain& chain, int layer, BackwardPart part, const FfnBackward& f);
  void shared_backward(Chain& chain, int layer, BackwardPart part);
  void experts_backward(Chain& chain, int layer, BackwardPart part, int c);

  // ---- MPipeMoE's memory reuse in the step (MoeDims::strategy != none; moe_mlp_reuse.cc).
  // After chunk c's experts in a microbatch's forward: T_DI copied to the host after fc1 (s1, s3),
  // T_M after fc2 (s1, s2), on the device-to-host copy stream.
  void offload(const Chain& chain, int layer, int c, TaskIndex fc1);
  // Before chunk c's expert backward: T_DI prefetched (s1, s3) or re-dispatched (s2, s4) from
  // `start` (the MLP backward's first task; a weight pass's own start) on, T_M prefetched (s1,
  // s2) or recomputed from T_DI on the chain (s3, s4); each into a buffer its first task
  // allocates, as much of each as the pass reads (restore_needs). `again` (".w") names the second
  // restore of a split backward, its weight pass's, apart from its input pass's.
  struct Restored {
    std::vector<TaskIndex> ready;    // what the chunk's expert backward waits for
    std::vector<BufferId> buffers;   // freed when the chunk's expert backward ends
  };
  struct RestoreNeeds {
    bool t_di = true;            // T_DI restored
    std::int64_t t_m_cols = 0;   // T_M's columns restored (of expert_kept_cols)
  };
  // A whole backward reads all of T_DI and T_M; a split backward's input pass T_M's columns the
  // activation's backward reads (T_DI only where T_M is recomputed from it), its weight pass T_DI
  // and the activation's output.
  RestoreNeeds restore_needs(BackwardPart part) const;
  Restored restore(Chain& chain, int layer, int c, std::optional<TaskIndex> start, BackwardPart part,
                   const std::string& again = "");
  // T_DI prefetched after its offload, or re-dispatched, from `from_start`; returns its last task.
  TaskIndex restore_t_di(const Chain& from_start, int layer, int c, std::optional<TaskIndex> offload,
                         const std::string& again);
  // The chunk's expert backward (the tasks from `first` to the last one emitted) waits for the
  // restores and frees them at its last task.
  void release(const Restored& r, TaskIndex first);
  std::int64_t t_di_bytes(int c) const;
  // T_M's bytes for chunk c: `cols` of its columns (0: all, expert_kept_cols).
  std::int64_t t_m_bytes(int c, std::int64_t cols = 0) const;

  StepEmitter& e_;
  const MoeDims& d_;
  MoeDispatcher dispatcher_;  // the all-to-all dispatcher's metadata, probabilities and sorts
  // --dispatcher deepep: the traffic of each (stage, chunk), shared by every layer and microbatch.
  std::map<std::pair<int, int>, std::shared_ptr<const TrafficMatrix>> dedup_traffic_;
  // The offload copies of T_DI and T_M by (stage, microbatch, layer, chunk), for their prefetches.
  std::map<std::tuple<int, int, int, int>, std::pair<std::optional<TaskIndex>, std::optional<TaskIndex>>> offloaded_;
};

}  // namespace moesim
