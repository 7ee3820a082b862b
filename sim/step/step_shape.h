// StepShape: a whole training step's sizes, derived from the model, the cluster and the StepSpec
// once, and checked once (issue 23 "Bad input"): every rule a layout breaks is an InputError
// naming the flag and the rule.
//
// Ranks, Megatron-Core's order tp-cp-ep-dp-pp (tensor fastest): rank = ((pp_index x dp + dp_index)
// x cp + cp_index) x tp + tp_index; with --use-tp-pp-dp-mapping (pp_before_dp) tp-cp-pp-dp: rank =
// ((dp_index x pp + pp_index) x cp + cp_index) x tp + tp_index, the experts' order tp-ep-pp-dp
// likewise. The simulation keeps one representative rank per pipeline
// stage, its rank with every other index 0 (stage_rank): within a stage the tensor, context and
// data-parallel ranks do the same work at the same time, so one of them stands for all; the
// collectives still run over the whole groups (tensor_group, data_group, ...), whose sizes and
// placement (NVLink within a node, the fabric across) the network models price.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/memory/activations.h"
#include "sim/memory/model_states.h"
#include "sim/schedule/pipeline_schedule.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/step_spec.h"

namespace moesim {

struct StepShape {
  StepLayout layout;
  int dp = 1;                    // data-parallel size of the dense blocks
  std::int64_t seq = 0;          // tokens per sequence
  std::int64_t micro_batch = 1;  // sequences per microbatch
  std::int64_t global_batch = 0;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  PipelineShape pipeline;        // stages, virtual stages, microbatches per pipeline
  // Layers of each model part, [first, first + count) in forward order.
  struct Part {
    int first_layer = 0;
    int layers = 0;
  };
  std::vector<Part> parts;
  DType gemm_dtype = DType::kBf16;     // linear layers' GEMMs (--precision)
  DType storage_dtype = DType::kBf16;  // the model's tensors, and the GEMMs FP8 training keeps in it
  Fp8Recipe fp8_recipe = Fp8Recipe::kCurrent;  // with fp8 GEMMs: how the quantisations are scaled
  int element_bytes = 2;
  int gpus_per_node = 1;  // the cluster's: which ranks share a node (rank / gpus_per_node)
  bool pp_before_dp = false;  // --use-tp-pp-dp-mapping: the rank order tp-cp-pp-dp

  // Tokens of one microbatch on one rank: micro_batch x seq / cp (each context-parallel rank
  // holds 1/cp of the sequence).
  std::int64_t tokens() const { return micro_batch * seq / layout.cp; }
  int stages() const { return layout.pp; }
  int num_parts() const { return static_cast<int>(parts.size()); }

  // The representative rank of a stage (every other index 0), and the stage a rank belongs to.
  int stage_rank(int stage) const { return stage * pipeline_stride(); }
  int stage_of(int rank) const { return pp_before_dp ? rank / pipeline_stride() % stages() : rank / pipeline_stride(); }
  // Sorted members of the groups of a stage's representative rank.
  std::vector<int> tensor_group(int stage) const;
  std::vector<int> context_group(int stage) const;
  // Every rank of the stage (tp x cp x dp): Megatron-Core's FP8 amax reduction group
  // (parallel_state.get_amax_reduction_group(with_context_parallel=True)).
  std::vector<int> stage_group(int stage) const;
  // The gradient groups: DualPipe's stages s and p - 1 - s hold the same two model parts, so
  // their replicas are one group (2 dp x cp, 2 cp x dp / ep) that sums both copies' gradients.
  std::vector<int> data_group(int stage) const;         // the dense blocks' data-parallel ranks (dp x cp)
  // The experts' groups (Megatron-Core's expert order tp-ep-dp-pp): etp consecutive ranks, ep
  // ranks strided by etp, and the stage_size / (etp x ep) replicas strided by etp x ep. With
  // etp = tp: ep ranks inside cp x dp, and cp x dp / ep replicas.
  std::vector<int> expert_tensor_group(int stage) const;
  std::vector<int> expert_group(int stage) const;
  std::vector<int> expert_data_group(int stage) const;
  // The stages whose ranks hold stage `stage`'s parameters: itself, and for DualPipe its mirror.
  std::vector<int> replica_stages(int stage) const;
  // The distance between a stage's expert-data-parallel replicas: etp x ep, or with pp before dp
  // etp x ep x pp (= tp x cp x pp where check_rank_order holds: MoE models with pp > 1; a dense
  // model's expert groups hold no work and are not meaningful there).
  int expert_replica_stride() const { return layout.expert_tp() * layout.ep * (pp_before_dp ? layout.pp : 1); }

 private:
  // The distance between neighbouring stages' ranks: a whole stage (tp x cp x dp) in the default
  // order, tp x cp with pp before dp.
  int pipeline_stride() const { return pp_before_dp ? layout.tp * layout.cp : layout.stage_size(); }
  // The distance between a stage's data-parallel replicas: tp x cp, or tp x cp x pp with pp before dp.
  int replica_stride() const { return pp_before_dp ? layout.tp * layout.cp * layout.pp : layout.tp * layout.cp; }
};

// What the memory accounting needs of a shape: the activations' layout, the model states'
// layout (the dense data-parallel group is cp x dp; the experts' replicas stage_size / (etp x ep)), and the
// layers each stage holds (its parts', in forward order; DualPipe's two chunks hold parts s and
// p - 1 - s, so every layer is held by two stages and both end stages hold both model ends).
ActivationLayout activation_layout(const StepShape& shape, const StepSpec& spec);
TrainingLayout states_layout(const StepShape& shape, int zero_stage);
std::vector<std::vector<int>> stage_layers(const StepShape& shape);

// The layers of each of `parts` model parts (in forward order) for a split the parts do not divide
// evenly, as Megatron-Core balances a pipeline whose first part also holds the embedding and whose
// last part the output layer and its loss (--account-for-embedding-in-pipeline-split,
// --account-for-loss-in-pipeline-split): each counts as one layer, the layers + 2 units spread
// over the parts as evenly as possible, and the end parts hold one layer fewer for them. Where the
// parts do not divide layers + 2 (Megatron-Core would then need --pipeline-model-parallel-layout),
// the parts nearest the middle take the units left over: the end parts already hold the model's
// ends, and stage 0 the most microbatches in flight. Every part holds at least one layer; throws
// InputError naming --pp x --vpp where it cannot (parts > layers, or two end parts of one unit).
std::vector<int> balanced_part_layers(int layers, int parts);

// The stages' programs the step runs: Megatron-Core's combined 1F1B with overlap_moe_ep_comm
// (combined_1f1b_programs), otherwise the schedule's own (stage_programs).
std::vector<std::vector<PipeAction>> step_programs(const StepShape& shape, const StepSpec& spec);

// Checks `spec` against the model and the cluster (whose GPU count the layout must fill) and
// derives the shape. Throws InputError naming the flag and the rule.
StepShape derive_step_shape(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec);
// derive_step_shape's rule for --routing: an imbalanced routing needs MoE layers (InputError).
// --strategy s1-s4 (StepSpec::moe_strategy): a model with MoE layers and no full recomputation.
// Throws InputError naming --strategy.
void check_moe_strategy(const ModelSpec& model, const StepSpec& spec);
// DualPipe and DualPipeV not with ZeRO 3 (their weight gathers are not modelled). Throws InputError naming
// --schedule.
void check_dualpipe_zero(const StepShape& shape, const StepSpec& spec);
// Selective recomputation's modules must drop something of the model: moe_act needs MoE layers,
// layernorm a norm that is a module of its own (recomputable_norms). InputError naming
// --recompute-modules.
void check_recompute_modules(const ModelSpec& model, const StepSpec& spec);
void check_step_routing(const ModelSpec& model, const RoutingSpec& routing);
// --use-tp-pp-dp-mapping with MoE layers and --pp > 1: --etp x --ep = --tp x --cp (Megatron-Core's
// dense and expert pipeline groups must be the same). Throws InputError naming the flag.
void check_rank_order(const ModelSpec& model, const StepSpec& spec);

// --dispatcher deepep: a model with MoE layers, a uniform routing, no capacity_factor other than 1,
// and expert groups that put the same number of ranks on every node they span. Throws InputError naming --dispatcher and the rule.
void check_dispatcher(const ModelSpec& model, const StepShape& shape, const StepSpec& spec);
// --overlap-moe-expert-parallel-comm: a model with MoE layers, and 1F1B without pipelining or the
// interleaved schedule (Megatron-Core's combined 1F1B). Throws InputError naming the flag.
void check_moe_ep_overlap(const ModelSpec& model, const StepShape& shape, const StepSpec& spec);

}  // namespace moesim
