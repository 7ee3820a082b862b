// StepBuilder: the whole step's graph builder behind build_step_graph (step_graph.h), shared by
// the files that define its parts: step_graph.cc (the pipeline programs, the passes, the buffers)
// and step_gradients.cc (the gradient reductions and ZeRO-3's weight gathers). Internal to
// sim/step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/error.h"
#include "sim/memory/activations.h"
#include "sim/memory/model_states.h"
#include "sim/spec/model_parameters.h"
#include "sim/step/fp8_scaling.h"
#include "sim/step/model_ends.h"
#include "sim/step/moe_mlp.h"
#include "sim/step/optimizer_step.h"
#include "sim/step/step_emitter.h"
#include "sim/step/step_graph.h"
#include "sim/step/step_shape.h"
#include "sim/step/transformer_layer.h"

namespace moesim::step_build {

struct Produced {
  int stage = 0;
  TaskIndex task = 0;
};

// Gradients are fp32 (Megatron's main_grads) and reduced as such.
constexpr std::int64_t kGradBytes = 4;

constexpr BufferId kNoBuffer = static_cast<BufferId>(-1);

inline std::vector<BufferId> some(BufferId b) { return b == kNoBuffer ? std::vector<BufferId>{} : std::vector<BufferId>{b}; }

class StepBuilder {
 public:
  StepBuilder(const ModelSpec& model, const StepSpec& spec, StepGraph& out)
      : model_(model),
        spec_(spec),
        out_(out),
        emitter_(out.graph, out.shape),
        dims_(transformer_dims(model, out.shape, spec)),
        moe_dims_(model.has_moe_layers() ? step_moe_dims(model, out.shape, spec) : MoeDims{}),
        moe_(emitter_, moe_dims_),
        layer_(emitter_, dims_, model, model.has_moe_layers() ? &moe_ : nullptr),
        ends_(emitter_, dims_, model.architecture.vocab_size, model.num_layers),
        optimizer_(emitter_, spec.zero_stage, model.dtype == DType::kFp16),
        programs_(step_programs(out.shape, spec)) {
    const ActivationLayout layout = activation_layout(out.shape, spec);
    for (int l = 0; l < model.num_layers; ++l) {
      // Dense and MoE layers keep different tensors; the layers of one kind keep the same.
      const bool moe = is_moe_layer(model, l);
      if (moe && !moe_act_) moe_act_ = layer_activations(model, layout, out.shape.layout.ep, l);
      if (!moe && !dense_act_) dense_act_ = layer_activations(model, layout, out.shape.layout.ep, l);
    }
    embedding_act_ = embedding_activations(model, layout);
    head_act_ = output_activations(model, layout);
    if (model.architecture.mtp_depth > 0) mtp_act_ = mtp_activations(model, layout);
  }

  void build();
  std::shared_ptr<const MoeRouting> routing() const { return moe_dims_.routing; }

 private:
  const StepShape& shape() const { return out_.shape; }
  int chunks() const { return chunks_per_stage(shape().schedule, shape().pipeline); }
  std::size_t slot(int microbatch, int part) const {
    return static_cast<std::size_t>(microbatch) * static_cast<std::size_t>(shape().num_parts()) +
           static_cast<std::size_t>(part);
  }
  // The layer whose kind (dense or MoE) and parameters a layer has: itself, or for a multi-token
  // prediction module's layer (numbered from num_layers on) the model's last.
  int kind_layer(int layer) const { return std::min(layer, model_.num_layers - 1); }
  int layer_slots() const { return model_.num_layers + model_.architecture.mtp_depth; }
  void mtp_forward(Chain& chain);
  void mtp_backward(Chain& chain, BackwardPart bpart, bool last_of_chunk);
  void backward_layer(Chain& chain, int layer, BackwardPart bpart, bool last_of_chunk);
  // The first GEMM emitted from task `first` on (`first` itself if none).
  TaskIndex first_gemm_from(TaskIndex first) const;
  int part_of(int stage, const PipeAction& a) const { return model_part(shape().schedule, shape().pipeline, stage, a.chunk); }
  // The output a stage's action needs from another action, or nothing; `ready` false when that
  // action is not emitted yet.
  std::optional<Produced> input_of(int stage, const PipeAction& a, bool& ready) const;
  void emit(int stage, std::size_t index);
  void receive_partner_input(int stage, std::size_t index);
  // Actions `index` and `index` + 1, DualPipe's overlapped forward and backward, interleaved.
  void emit_overlapped(int stage, std::size_t index);
  // The transfer into `part`'s pass (the consumer) from the stage that produced its input.
  void transfer(Chain& chain, int part, const Produced& from, bool gradient);
  void forward(Chain& chain, int part);
  void backward(Chain& chain, int part, BackwardPart bpart, bool last_of_chunk);
  // FP8 delayed scaling: the amax histories' update after a model part's forward or backward
  // (sim/step/fp8_scaling.h); nothing for other recipes.
  void fp8_scaling_update(Chain& chain, int part, Pass pass);
  void setup_stage_buffers();
  void layer_buffers(int stage, int microbatch, int layer);
  void emit_programs();
  void finish();
  void also_after(std::optional<TaskIndex> task, std::optional<TaskIndex> before,
                  const std::vector<std::optional<TaskIndex>>& others);
  void reduce_rest(const std::vector<int>& stages);
  // ZeRO 2-3: notes the stage's first task (from `first` on, if any was emitted) that writes
  // gradients reduce_rest() reduces (the embedding's, the head's, or every layer's when the
  // reduction does not overlap the backward); their whole fp32 buffer lives from there to it.
  void note_rest_grads(int stage, TaskIndex first);
  // ZeRO 2-3: a buffer "<owner>.unsharded" of whole fp32 gradients on `stage`, allocated by `from`;
  // the reduce-scatter that leaves the shard frees it.
  BufferId unsharded_grads(int stage, const std::string& owner, std::int64_t bytes, TaskIndex from);
  // A layer's parameters on one GPU: its dense part (whose gradients reduce over the
  // data-parallel group) and its routed experts' (over the experts' data-parallel group).
  std::pair<std::int64_t, std::int64_t> layer_params(int layer) const;
  // `counted`: its bytes join what the per-layer reductions cover (once per layer). With
  // `unsharded_from` (ZeRO 2-3), a buffer of the layer's whole gradients from that task (the
  // layer's first backward task) to the reduction's end.
  void reduce_layer_grads(const Chain& chain, int layer, bool counted = true,
                          std::optional<TaskIndex> unsharded_from = std::nullopt);
  // ZeRO-3: the layer's weights all-gathered over their data-parallel groups before its pass, one
  // layer ahead: from the start of the stage's previous layer pass (FSDP's prefetch). The
  // gathered weights are buffers (dense, routed experts; none below ZeRO 3 or for a group of one)
  // that each gather allocates and the pass's last task frees. The gathers are emitted before the
  // pass, as the framework issues them (the host model issues a rank's tasks in emission order);
  // gathered() makes the pass's first task wait for them.
  struct Gathered {
    BufferId dense = kNoBuffer, expert = kNoBuffer;
    std::vector<TaskIndex> tasks;
    std::vector<BufferId> ids() const;
  };
  Gathered gather_weights(const Chain& chain, int layer, Pass pass);
  void gathered(const Chain& chain, const Gathered& gathers, TaskIndex first);

  const ModelSpec& model_;
  const StepSpec& spec_;
  StepGraph& out_;
  StepEmitter emitter_;
  TransformerDims dims_;
  MoeDims moe_dims_;
  MoeMlp moe_;
  TransformerLayer layer_;
  ModelEnds ends_;
  OptimizerStep optimizer_;
  std::vector<std::vector<PipeAction>> programs_;
  std::vector<std::optional<TaskIndex>> last_action_task_;  // per stage
  std::vector<std::optional<TaskIndex>> partner_input_;     // per stage: DualPipe's early-received gradient
  std::vector<std::optional<Produced>> forward_out_, backward_out_;
  std::vector<std::size_t> last_gradient_action_;  // per stage and chunk: the program index of the last B or W
  std::vector<std::vector<TaskIndex>> grad_reductions_;  // per stage
  // Per stage, what the per-layer reductions reduced: dense and expert gradient bytes.
  std::vector<std::int64_t> reduced_dense_bytes_, reduced_expert_bytes_;
  // Activation buffers of the current action: kept (alloc in forward, free in backward) and recomputed.
  std::vector<BufferId> kept_, recomputed_;  // by microbatch x layer; kNoBuffer where none
  std::vector<BufferId> ends_kept_;          // by microbatch x 2: the embedding's, the head's
  std::vector<BufferId> mtp_kept_;           // by microbatch x MTP depth: each module's own tensors
  std::vector<double> stage_dense_params_, stage_expert_params_;  // per GPU, per stage
  std::vector<std::optional<TaskIndex>> previous_layer_start_;    // per stage, for ZeRO-3's prefetch
  std::vector<std::optional<TaskIndex>> rest_grads_from_;         // per stage: note_rest_grads()
  // Per stage x layer slot, DualPipe with ZeRO 2 (a layer's copies reduced once, after the step's
  // last microbatch): the first task writing the copy's weight gradients, where its whole fp32
  // gradients begin.
  std::vector<std::optional<TaskIndex>> pair_grads_from_;
  std::vector<std::optional<TaskIndex>> first_copy_done_;  // per layer slot: DualPipe's first copy's last backward
  std::optional<LayerActivations> dense_act_, moe_act_;
  std::int64_t embedding_act_ = 0, head_act_ = 0, mtp_act_ = 0;
};

}  // namespace moesim::step_build
