// Model states per GPU of a whole-network model (sim/spec/model_architecture.h) under a layout of
// tensor (tp), pipeline (pp), expert (ep) and data (dp) parallelism and a ZeRO stage: the weights,
// gradients and Adam optimizer states each GPU of each pipeline stage holds.
//
// Layout, as DeepSpeed-TED and Megatron-Core place them (sim/spec/parallel_layout.h): G = tp x pp
// x ep x dp GPUs. The layers are split evenly over the pp stages (pp must divide them), the first
// stage also holding the input embedding, the last the final norm, the output head (with tied
// embeddings and several stages, a copy of the embedding) and the MTP modules. Within a stage:
//   - attention, dense MLPs and shared experts are tensor parallel (1/tp each), as are the
//     embedding and the output head (vocabulary-parallel); norms, routers, learned positions and
//     what LayerParameters::tp_replicated names (row-parallel biases, qk norms, MLA's down
//     projections) are replicated (local_layer_parameters, sim/spec/model_parameters.h);
//   - routed experts are split over the ep ranks, each expert's matrices over the etp ranks (1/(ep x
//     etp); etp = tp is Megatron-Core's default expert-tensor-parallel size and TED's layout, and
//     another etp its "parallel folding", the experts laid out etp x ep x dp over the stage's ranks);
//   - the expert states are replicated over dp GPUs (the experts' data-parallel size), the
//     non-expert states over the rest of the stage's ranks: etp x ep x dp / tp.
// Bytes per parameter (mixed-precision Adam, Megatron's accounting): weights in the model's dtype,
// fp32 gradients (main_grads) and 12 bytes of optimizer state (fp32 master weights, two moments);
// an fp32 model keeps no separate master copy (4 + 4 + 8). ZeRO shards over the data-parallel
// replicas of each state: stage 1 the optimizer states, 2 also the gradients, 3 also the weights.
// Megatron's distributed optimizer is ZeRO-1 (6 + 12/dp bytes per bf16 parameter).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/spec/model_spec.h"

namespace moesim {

struct TrainingLayout {
  int tp = 1;
  int pp = 1;
  int ep = 1;
  int etp = 0;  // the experts' tensor-parallel size; 0: tp
  int dp = 1;   // replicas of the etp x pp x ep ranks (the experts' data-parallel size)
  int expert_tp() const { return etp > 0 ? etp : tp; }
  int zero_stage = 0;
  // DualPipe: the first and the last stage each hold both ends (the embedding of one direction's
  // first part and the head and MTP modules of the other's last part).
  bool ends_on_both_end_stages = false;
  // DualPipeV: the V's last part, with the final norm, the head and the MTP modules, is on the first
  // stage beside the embedding (a tied table is then one copy).
  bool head_on_first_stage = false;
};

struct StageModelStates {
  int first_layer = 0;
  int layers = 0;
  double dense_params = 0;   // per GPU: non-expert parameters (after tensor parallelism)
  double expert_params = 0;  // per GPU: routed-expert parameters (after expert and tensor parallelism)
  double weight_bytes = 0;
  double grad_bytes = 0;
  double optimizer_bytes = 0;
  double bytes() const { return weight_bytes + grad_bytes + optimizer_bytes; }
};

// One entry per pipeline stage. Throws InputError naming the rule for a layout the model does not
// divide (pp not dividing the layers, ep not dividing the experts, tp not dividing the attention
// heads, key/value groups or MLP widths, a ZeRO stage outside 0..3) or a model without an
// architecture section.
std::vector<StageModelStates> model_states_per_gpu(const ModelSpec& model, const TrainingLayout& layout);

// As above with the layers of each stage given: stage_layers[s] lists stage s's layers (an uneven
// split, or the interleaved schedule's parts; layout.pp must be stage_layers.size()). The first
// stage holds the embedding, the last the head and the MTP modules (with ends_on_both_end_stages
// each of the two holds all of them; with head_on_first_stage the first holds them all). first_layer and layers are
// the stage's lowest layer and its count.
std::vector<StageModelStates> model_states_per_gpu(const ModelSpec& model, const TrainingLayout& layout,
                                                   const std::vector<std::vector<int>>& stage_layers);

// The tensor- and expert-parallel part of those checks : tp dividing the heads, key/value groups
// and dense MLP widths, ep the experts, the experts' tensor-parallel size etp (0: tp) the experts'
// d_ffn; ep > 1 refused for a model without experts. The caller has checked that all are at least 1.
void check_tensor_expert_parallel(const ModelSpec& model, int tp, int ep, int etp = 0);

}  // namespace moesim
