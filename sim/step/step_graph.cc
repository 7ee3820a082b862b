#include "sim/step/step_graph.h"

#include <memory>
#include <optional>
#include <string>

#include "sim/core/error.h"
#include "sim/memory/activations.h"
#include "sim/memory/model_states.h"
#include "sim/spec/model_parameters.h"
#include "sim/step/fp8_scaling.h"
#include "sim/step/model_ends.h"
#include "sim/step/moe_mlp.h"
#include "sim/step/optimizer_step.h"
#include "sim/step/step_emitter.h"
#include "sim/step/transformer_layer.h"

namespace moesim {
namespace {

struct Produced {
  int stage = 0;
  TaskIndex task = 0;
};

std::vector<int> stage_ranks(const StepShape& shape) {
  std::vector<int> out;
  for (int s = 0; s < shape.stages(); ++s) out.push_back(shape.stage_rank(s));
  return out;
}

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
        programs_(stage_programs(out.shape.schedule, out.shape.pipeline)) {
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
  int part_of(int stage, const PipeAction& a) const { return model_part(shape().schedule, shape().pipeline, stage, a.chunk); }
  // The output a stage's action needs from another action, or nothing; `ready` false when that
  // action is not emitted yet.
  std::optional<Produced> input_of(int stage, const PipeAction& a, bool& ready) const;
  void emit(int stage, std::size_t index);
  void receive_partner_input(int stage, std::size_t index);
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
  // A layer's parameters on one GPU: its dense part (whose gradients reduce over the
  // data-parallel group) and its routed experts' (over the experts' data-parallel group).
  std::pair<std::int64_t, std::int64_t> layer_params(int layer) const;
  // `counted`: its bytes join what the per-layer reductions cover (once per layer).
  void reduce_layer_grads(const Chain& chain, int layer, bool counted = true);
  // ZeRO-3: the layer's weights all-gathered over their data-parallel groups before its pass
  // (first task `first`), one layer ahead: from the start of the stage's previous layer pass (FSDP's
  // prefetch). The gathered weights are buffers (dense, routed experts; none below ZeRO 3 or for a
  // group of one) that each gather allocates and the pass's last task frees.
  struct Gathered { BufferId dense, expert; std::vector<BufferId> ids() const; };
  Gathered gathered_weights(int stage, int microbatch, int layer, Pass pass);
  void gather_weights(const Chain& chain, int layer, Pass pass, TaskIndex first, const Gathered& buffers);

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
  std::vector<std::optional<TaskIndex>> first_copy_done_;  // per layer slot: DualPipe's first copy's last backward
  std::optional<LayerActivations> dense_act_, moe_act_;
  std::int64_t embedding_act_ = 0, head_act_ = 0, mtp_act_ = 0;
};

// Gradients are fp32 (Megatron's main_grads) and reduced as such.
constexpr std::int64_t kGradBytes = 4;

constexpr BufferId kNoBuffer = static_cast<BufferId>(-1);

std::vector<BufferId> some(BufferId b) { return b == kNoBuffer ? std::vector<BufferId>{} : std::vector<BufferId>{b}; }

std::optional<Produced> StepBuilder::input_of(int stage, const PipeAction& a, bool& ready) const {
  ready = true;
  const int part = part_of(stage, a);
  const std::vector<std::optional<Produced>>* table = nullptr;
  int from_part = 0;
  if (a.work == PipeWork::kForward) {
    if (part == 0) return std::nullopt;
    table = &forward_out_;
    from_part = part - 1;
  } else if (a.work == PipeWork::kBackwardWeight) {
    table = &backward_out_;  // its own input gradient pass, on this stage
    from_part = part;
  } else if (part + 1 < shape().num_parts()) {
    table = &backward_out_;
    from_part = part + 1;
  } else {
    table = &forward_out_;  // the loss starts from this stage's own forward
    from_part = part;
  }
  const auto& produced = (*table)[slot(a.microbatch, from_part)];
  if (!produced) ready = false;
  return produced;
}

void StepBuilder::transfer(Chain& chain, int part, const Produced& from, bool gradient) {
  const int to_rank = shape().stage_rank(chain.stage);
  const int from_rank = shape().stage_rank(from.stage);
  // Each tensor-parallel rank sends its 1/tp of the microbatch's hidden states.
  const std::int64_t bytes = dims_.tokens * dims_.hidden * shape().element_bytes / shape().layout.tp;
  const int from_member = from_rank < to_rank ? 0 : 1;
  const TaskName name{"p2p", 0, gradient ? Pass::kBackward : Pass::kForward,
                      "part" + std::to_string(part) + ".s" + std::to_string(from.stage) + "-s" +
                          std::to_string(chain.stage),
                      "p2p"};
  const TaskIndex index =
      emitter_.sends(chain, name, StreamClass::kCommPipeline, {std::min(from_rank, to_rank), std::max(from_rank, to_rank)},
                     {{from_member, 1 - from_member}}, bytes);
  out_.graph.add_dependency(from.task, index);
  // The receive is posted once the stage has finished its previous action.
  if (last_action_task_[static_cast<std::size_t>(chain.stage)])
    out_.graph.add_dependency(*last_action_task_[static_cast<std::size_t>(chain.stage)], index);
}

std::pair<std::int64_t, std::int64_t> StepBuilder::layer_params(int layer) const {
  // Norms and the router are replicated on the tensor-parallel ranks, routed experts split over
  // the expert-parallel and the experts' tensor-parallel ranks.
  const LayerParameters p = layer_parameters(model_, kind_layer(layer));
  const int tp = shape().layout.tp;
  const std::int64_t dense = (p.attention + p.dense_mlp + p.shared_experts) / tp + p.norms + p.router;
  const std::int64_t expert = p.routed_experts / (static_cast<std::int64_t>(shape().layout.ep) * shape().layout.expert_tp());
  return {dense, expert};
}

void StepBuilder::reduce_layer_grads(const Chain& chain, int l, bool counted) {
  // DualPipe: the layer's other copy (on the mirror stage) joins the same reduction; it is emitted
  // once, when the second copy's gradients are done, after the first's.
  std::optional<TaskIndex> first_copy;
  if (shape().replica_stages(chain.stage).size() > 1) {
    std::optional<TaskIndex>& pending = first_copy_done_[static_cast<std::size_t>(l)];
    if (!pending) {
      pending = chain.last;
      return;
    }
    first_copy = pending;
  }
  const auto [dense_params, expert_params] = layer_params(l);
  const std::int64_t dense = kGradBytes * dense_params, expert = kGradBytes * expert_params;
  const auto op = spec_.zero_stage >= 1 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  const std::vector<int> stages = shape().replica_stages(chain.stage);
  auto reduce = [&](const std::vector<int>& group, std::int64_t bytes, const char* what, std::vector<std::int64_t>& reduced) {
    if (group.size() <= 1 || bytes == 0) return;
    Chain side = chain;
    const auto task = emitter_.group_collective(side, {"L" + std::to_string(l), l, Pass::kBackward, what, "grad"},
                                                StreamClass::kCommGrad, op, group, bytes, true);
    also_after(task, chain.last, {first_copy});
    for (int s : stages) {
      grad_reductions_[static_cast<std::size_t>(s)].push_back(*task);
      if (counted) reduced[static_cast<std::size_t>(s)] += bytes;
    }
  };
  reduce(shape().data_group(chain.stage), dense, "grad.reduce", reduced_dense_bytes_);
  reduce(shape().expert_data_group(chain.stage), expert, "expert.grad.reduce", reduced_expert_bytes_);
}

std::vector<BufferId> StepBuilder::Gathered::ids() const {
  std::vector<BufferId> out = some(dense);
  if (expert != kNoBuffer) out.push_back(expert);
  return out;
}

StepBuilder::Gathered StepBuilder::gathered_weights(int stage, int microbatch, int l, Pass pass) {
  Gathered out{kNoBuffer, kNoBuffer};
  if (spec_.zero_stage < 3) return out;
  const auto [dense, expert] = layer_params(l);
  const std::int64_t element = shape().element_bytes;
  const std::string prefix = "mb" + std::to_string(microbatch) + ".L" + std::to_string(l) + "." +
                             std::string(to_string(pass)) + ".";
  // The whole layer's weights (every replica's shard) in the model's dtype, as the gather writes them.
  if (shape().data_group(stage).size() > 1 && dense > 0)
    out.dense = emitter_.buffer(stage, prefix + "weights.gathered", dense * element, MemoryCategory::kTemporary);
  if (shape().expert_data_group(stage).size() > 1 && expert > 0)
    out.expert = emitter_.buffer(stage, prefix + "expert.weights.gathered", expert * element, MemoryCategory::kTemporary);
  return out;
}

void StepBuilder::gather_weights(const Chain& chain, int l, Pass pass, TaskIndex first, const Gathered& buffers) {
  const auto st = static_cast<std::size_t>(chain.stage);
  std::optional<TaskIndex>& previous = previous_layer_start_[st];
  if (spec_.zero_stage < 3) return;
  const auto [dense, expert] = layer_params(l);
  const std::int64_t element = shape().element_bytes;
  std::vector<TaskIndex> gathers;
  auto gather = [&](const std::vector<int>& group, std::int64_t params, const char* what, BufferId buffer) {
    if (group.size() <= 1 || params == 0) return;
    Chain side{chain.stage, chain.microbatch, previous};
    TaskName name{"L" + std::to_string(l), l, pass, what, "zero3"};
    name.allocates = some(buffer);
    const auto task = emitter_.group_collective(side, name, StreamClass::kCommGrad, CollectiveOp::kAllGather, group,
                                                params * element, true);
    gathers.push_back(*task);
  };
  gather(shape().data_group(chain.stage), dense, "weights.allgather", buffers.dense);
  gather(shape().expert_data_group(chain.stage), expert, "expert.weights.allgather", buffers.expert);
  for (TaskIndex g : gathers) out_.graph.add_dependency(g, first);
  previous = first;
}

void StepBuilder::layer_buffers(int stage, int microbatch, int layer) {
  const std::size_t i = static_cast<std::size_t>(microbatch) * static_cast<std::size_t>(layer_slots()) +
                        static_cast<std::size_t>(layer);
  const std::string prefix = "mb" + std::to_string(microbatch) + ".L" + std::to_string(layer);
  const LayerActivations& act = is_moe_layer(model_, kind_layer(layer)) ? *moe_act_ : *dense_act_;
  if (act.kept_bytes > 0)
    kept_[i] = emitter_.buffer(stage, prefix + ".act", act.kept_bytes, MemoryCategory::kActivations);
  const bool recomputes = spec_.recompute == Recompute::kFull ||
                          (spec_.recompute == Recompute::kSelective && spec_.attention == AttentionKernel::kUnfused);
  if (recomputes && act.recompute_bytes > 0)
    recomputed_[i] = emitter_.buffer(stage, prefix + ".recompute", act.recompute_bytes,
                                     MemoryCategory::kActivations);
}

void StepBuilder::forward(Chain& chain, int part) {
  const StepShape::Part& p = shape().parts[static_cast<std::size_t>(part)];
  const std::size_t mb = static_cast<std::size_t>(chain.microbatch);
  if (part == 0) {
    if (embedding_act_ > 0)
      ends_kept_[2 * mb] = emitter_.buffer(chain.stage, "mb" + std::to_string(mb) + ".embed.act", embedding_act_,
                                           MemoryCategory::kActivations);
    ends_.embedding_forward(chain, some(ends_kept_[2 * mb]));
  }
  for (int l = p.first_layer; l < p.first_layer + p.layers; ++l) {
    layer_buffers(chain.stage, chain.microbatch, l);
    const auto first = static_cast<TaskIndex>(out_.graph.num_tasks());
    const Gathered gathered = gathered_weights(chain.stage, chain.microbatch, l, Pass::kForward);
    layer_.forward(chain, l, some(kept_[mb * static_cast<std::size_t>(layer_slots()) + static_cast<std::size_t>(l)]), "",
                   gathered.ids());
    gather_weights(chain, l, Pass::kForward, first, gathered);
  }
  fp8_scaling_update(chain, part, Pass::kForward);
  if (part + 1 == shape().num_parts()) {
    if (head_act_ > 0)
      ends_kept_[2 * mb + 1] = emitter_.buffer(chain.stage, "mb" + std::to_string(mb) + ".head.act", head_act_,
                                               MemoryCategory::kActivations);
    ends_.head_forward(chain, some(ends_kept_[2 * mb + 1]));
    mtp_forward(chain);
  }
}

void StepBuilder::fp8_scaling_update(Chain& chain, int part, Pass pass) {
  const StepShape::Part& p = shape().parts[static_cast<std::size_t>(part)];
  std::int64_t gemms = 0;
  for (int l = p.first_layer; l < p.first_layer + p.layers; ++l) gemms += layer_.fp8_gemms(l);
  fp8_delayed_scaling_update(emitter_, chain, {"part" + std::to_string(part), p.first_layer, pass, "fp8", "fp8"}, gemms);
}

void StepBuilder::mtp_forward(Chain& chain) {
  const auto mb = static_cast<std::size_t>(chain.microbatch);
  const auto depth = static_cast<std::size_t>(model_.architecture.mtp_depth);
  for (std::size_t d = 0; d < depth; ++d) {
    const int layer = model_.num_layers + static_cast<int>(d);
    if (mtp_act_ > 0)
      mtp_kept_[mb * depth + d] = emitter_.buffer(chain.stage, "mb" + std::to_string(mb) + ".mtp" + std::to_string(d) + ".act",
                                                 mtp_act_, MemoryCategory::kActivations);
    ends_.mtp_input_forward(chain, static_cast<int>(d), some(mtp_kept_[mb * depth + d]));
    layer_buffers(chain.stage, chain.microbatch, layer);
    layer_.forward(chain, layer, some(kept_[mb * static_cast<std::size_t>(layer_slots()) + static_cast<std::size_t>(layer)]));
    ends_.head_forward(chain, {}, "mtp" + std::to_string(d) + ".head");
  }
}

void StepBuilder::mtp_backward(Chain& chain, BackwardPart bpart, bool last_of_chunk) {
  const auto mb = static_cast<std::size_t>(chain.microbatch);
  const int depth = model_.architecture.mtp_depth;
  for (int d = depth - 1; d >= 0; --d) {
    const int layer = model_.num_layers + d;
    ends_.head_backward(chain, bpart, {}, "mtp" + std::to_string(d) + ".head");
    backward_layer(chain, layer, bpart, last_of_chunk);
    const std::vector<BufferId> frees = bpart == BackwardPart::kInput
                                            ? std::vector<BufferId>{}
                                            : some(mtp_kept_[mb * static_cast<std::size_t>(depth) + static_cast<std::size_t>(d)]);
    ends_.mtp_input_backward(chain, d, bpart, frees);
  }
}

void StepBuilder::backward(Chain& chain, int part, BackwardPart bpart, bool last_of_chunk) {
  const StepShape::Part& p = shape().parts[static_cast<std::size_t>(part)];
  const std::size_t mb = static_cast<std::size_t>(chain.microbatch);
  if (part + 1 == shape().num_parts()) {
    mtp_backward(chain, bpart, last_of_chunk);
    ends_.head_backward(chain, bpart, bpart == BackwardPart::kInput ? std::vector<BufferId>{} : some(ends_kept_[2 * mb + 1]));
  }
  for (int l = p.first_layer + p.layers - 1; l >= p.first_layer; --l) backward_layer(chain, l, bpart, last_of_chunk);
  if (bpart != BackwardPart::kWeight) fp8_scaling_update(chain, part, Pass::kBackward);
  if (part == 0 && bpart != BackwardPart::kWeight) ends_.embedding_backward(chain, some(ends_kept_[2 * mb]));
}

void StepBuilder::backward_layer(Chain& chain, int l, BackwardPart bpart, bool last_of_chunk) {
  const std::size_t i = static_cast<std::size_t>(chain.microbatch) * static_cast<std::size_t>(layer_slots()) +
                        static_cast<std::size_t>(l);
  std::vector<BufferId> frees = some(kept_[i]);
  // ZeRO-3 gathers the weights before the recomputation too, which runs the layer's forward.
  const auto first = static_cast<TaskIndex>(out_.graph.num_tasks());
  Gathered gathered{kNoBuffer, kNoBuffer};
  if (bpart != BackwardPart::kWeight) {
    gathered = gathered_weights(chain.stage, chain.microbatch, l, Pass::kBackward);
    if (spec_.recompute == Recompute::kFull) layer_.forward(chain, l, some(recomputed_[i]), "recompute.");
    if (spec_.recompute == Recompute::kSelective) layer_.recompute_core(chain, l, some(recomputed_[i]));
    if (recomputed_[i] != kNoBuffer) frees.push_back(recomputed_[i]);
  }
  layer_.backward(chain, l, bpart, bpart == BackwardPart::kInput ? std::vector<BufferId>{} : frees, gathered.ids());
  if (bpart != BackwardPart::kWeight) gather_weights(chain, l, Pass::kBackward, first, gathered);
  if (!spec_.overlap_grad_reduce || bpart == BackwardPart::kInput) return;
  // ZeRO 2-3 keep a shard of the gradients: each microbatch's are reduce-scattered (DeepSpeed,
  // FSDP); below, the last microbatch reduces the buffer. DualPipe's two copies reduce once.
  const bool every_microbatch = spec_.zero_stage >= 2 && shape().replica_stages(chain.stage).size() == 1;
  if (every_microbatch || last_of_chunk) reduce_layer_grads(chain, l, last_of_chunk);
}

void StepBuilder::emit(int stage, std::size_t index) {
  const PipeAction& a = programs_[static_cast<std::size_t>(stage)][index];
  const int part = part_of(stage, a);
  const auto first = static_cast<TaskIndex>(out_.graph.num_tasks());
  Chain chain{stage, a.microbatch, std::nullopt};
  std::optional<TaskIndex>& early = partner_input_[static_cast<std::size_t>(stage)];
  bool ready = true;
  if (early) {
    chain.last = early;  // received with the forward it overlaps
    early.reset();
  } else if (const auto in = input_of(stage, a, ready)) {
    if (in->stage != stage) transfer(chain, part, *in, a.work != PipeWork::kForward);
    else chain.last = in->task;
  }
  if (a.overlaps_next) receive_partner_input(stage, index);
  const auto first_task = static_cast<TaskIndex>(out_.graph.num_tasks());
  const bool last_of_chunk =
      last_gradient_action_[static_cast<std::size_t>(stage * chunks() + a.chunk)] == index;
  switch (a.work) {
    case PipeWork::kForward:
      forward(chain, part);
      if (early) out_.graph.add_dependency(*early, first_task);
      forward_out_[slot(a.microbatch, part)] = Produced{stage, *chain.last};
      break;
    case PipeWork::kBackward:
    case PipeWork::kBackwardInput:
      backward(chain, part, a.work == PipeWork::kBackward ? BackwardPart::kAll : BackwardPart::kInput, last_of_chunk);
      backward_out_[slot(a.microbatch, part)] = Produced{stage, *chain.last};
      break;
    case PipeWork::kBackwardWeight:
      backward(chain, part, BackwardPart::kWeight, last_of_chunk);
      break;
  }
  last_action_task_[static_cast<std::size_t>(stage)] = chain.last;
  out_.passes.push_back({stage, a, part, first, static_cast<TaskIndex>(out_.graph.num_tasks())});
}

// DualPipe launches an overlapped forward and backward together, once the inputs of both have
// arrived (the reference posts both receives, waits, then computes): the backward's transfer is
// emitted with the forward, after the stage's previous action, and the forward waits for it too.
void StepBuilder::receive_partner_input(int stage, std::size_t index) {
  const PipeAction& partner = programs_[static_cast<std::size_t>(stage)][index + 1];
  bool ready = true;
  const auto in = input_of(stage, partner, ready);
  if (!in || in->stage == stage) return;
  Chain chain{stage, partner.microbatch, std::nullopt};
  transfer(chain, part_of(stage, partner), *in, true);
  partner_input_[static_cast<std::size_t>(stage)] = chain.last;
}

void StepBuilder::setup_stage_buffers() {
  const auto states = model_states_per_gpu(model_, states_layout(shape(), spec_.zero_stage), stage_layers(shape()));
  std::vector<std::int64_t> grad_buffers;
  for (int s = 0; s < shape().stages(); ++s) {
    const StageModelStates& st = states[static_cast<std::size_t>(s)];
    emitter_.buffer(s, "weights", static_cast<std::int64_t>(st.weight_bytes), MemoryCategory::kModelStates, true);
    emitter_.buffer(s, "grads", static_cast<std::int64_t>(st.grad_bytes), MemoryCategory::kModelStates, true);
    emitter_.buffer(s, "optimizer", static_cast<std::int64_t>(st.optimizer_bytes), MemoryCategory::kModelStates, true);
    out_.model_state_bytes.push_back(static_cast<std::int64_t>(st.bytes()));
    stage_dense_params_.push_back(st.dense_params);
    stage_expert_params_.push_back(st.expert_params);
    grad_buffers.push_back(static_cast<std::int64_t>(st.grad_bytes));
  }
  optimizer_.zero_grad_buffers(grad_buffers);
}

void StepBuilder::finish() {
  const int stages = shape().stages();
  std::optional<TaskIndex> tied;
  // The embedding's and the output layer's copies of the shared matrix sum their gradients.
  // DualPipe's end stages hold both, summed locally (not timed) and then over the data-parallel
  // group that spans both end stages.
  if (model_.architecture.tied_embeddings && stages > 1 && shape().schedule != PipelineSchedule::kDualPipe) {
    const std::int64_t bytes = kGradBytes * model_.architecture.vocab_size / shape().layout.tp * model_.d_model;
    const GroupId group = out_.graph.add_group({shape().stage_rank(0), shape().stage_rank(stages - 1)});
    Task t;
    t.id = "embedding.grad.allreduce";
    t.rank = -1;
    t.stream = StreamClass::kCommGrad;
    t.work = CollectiveWork(CollectiveOp::kAllReduce, group, bytes / 2);
    t.pass = Pass::kBackward;
    t.stage = "grad";
    tied = out_.graph.add_task(std::move(t));
    for (int s : {0, stages - 1})
      if (last_action_task_[static_cast<std::size_t>(s)])
        out_.graph.add_dependency(*last_action_task_[static_cast<std::size_t>(s)], *tied);
  }
  for (int s = 0; s < stages; ++s) {
    const std::vector<int> replicas = shape().replica_stages(s);
    if (replicas.front() == s) reduce_rest(replicas);  // once for DualPipe's mirror pair
  }
  // The optimizer step (optimizer_step.h) of every stage waits for its reductions and the tied embedding's.
  std::vector<StageOptimizerInput> inputs;
  for (int s = 0; s < stages; ++s) {
    const auto st = static_cast<std::size_t>(s);
    StageOptimizerInput in{last_action_task_[st], grad_reductions_[st], stage_dense_params_[st], stage_expert_params_[st]};
    if (tied && (s == 0 || s == stages - 1)) in.after.push_back(*tied);
    inputs.push_back(std::move(in));
  }
  optimizer_.step(inputs);
  out_.launch_notes = emitter_.launch_notes();
}

// Whether `task` is one just emitted (an emitter call that had nothing to do returns the chain's
// previous task), so that the other replica stages' tasks can be added as its predecessors.
void StepBuilder::also_after(std::optional<TaskIndex> task, std::optional<TaskIndex> before,
                             const std::vector<std::optional<TaskIndex>>& others) {
  if (!task || task == before) return;
  for (const auto& other : others)
    if (other) out_.graph.add_dependency(*other, *task);
}

// What the per-layer reductions left (the embedding, the head, the final norm, or everything),
// reduced once over the replicas of the stages in `stages` (one stage, or DualPipe's mirror pair,
// which holds the same parameters), after all of them have run their last action.
void StepBuilder::reduce_rest(const std::vector<int>& stages) {
  const int lead = stages.front();
  const auto st = static_cast<std::size_t>(lead);
  const Chain chain{lead, -1, last_action_task_[st]};
  std::vector<std::optional<TaskIndex>> others;
  for (std::size_t k = 1; k < stages.size(); ++k) others.push_back(last_action_task_[static_cast<std::size_t>(stages[k])]);
  const auto op = spec_.zero_stage >= 1 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  auto reduce = [&](const std::vector<int>& group, std::int64_t rest, const char* what) {
    if (rest <= 0 || group.size() <= 1) return;
    Chain grad = chain;
    const auto task = emitter_.group_collective(grad, {"stage" + std::to_string(lead), 0, Pass::kBackward, what, "grad"},
                                                StreamClass::kCommGrad, op, group, rest, true);
    also_after(task, chain.last, others);
    for (int s : stages) grad_reductions_[static_cast<std::size_t>(s)].push_back(*task);
  };
  reduce(shape().data_group(lead), kGradBytes * static_cast<std::int64_t>(stage_dense_params_[st]) - reduced_dense_bytes_[st],
         "grad.reduce");
  reduce(shape().expert_data_group(lead),
         kGradBytes * static_cast<std::int64_t>(stage_expert_params_[st]) - reduced_expert_bytes_[st], "expert.grad.reduce");
}

void StepBuilder::build() {
  const int stages = shape().stages();
  const std::size_t slots = slot(shape().pipeline.microbatches, 0);
  forward_out_.assign(slots, std::nullopt);
  backward_out_.assign(slots, std::nullopt);
  const std::size_t layers = static_cast<std::size_t>(shape().pipeline.microbatches) *
                             static_cast<std::size_t>(layer_slots());
  kept_.assign(layers, kNoBuffer);
  recomputed_.assign(layers, kNoBuffer);
  ends_kept_.assign(2 * static_cast<std::size_t>(shape().pipeline.microbatches), kNoBuffer);
  mtp_kept_.assign(static_cast<std::size_t>(shape().pipeline.microbatches) *
                       static_cast<std::size_t>(model_.architecture.mtp_depth),
                   kNoBuffer);
  last_action_task_.assign(static_cast<std::size_t>(stages), std::nullopt);
  partner_input_.assign(static_cast<std::size_t>(stages), std::nullopt);
  grad_reductions_.assign(static_cast<std::size_t>(stages), {});
  reduced_dense_bytes_.assign(static_cast<std::size_t>(stages), 0);
  previous_layer_start_.assign(static_cast<std::size_t>(stages), std::nullopt);
  first_copy_done_.assign(static_cast<std::size_t>(layer_slots()), std::nullopt);
  reduced_expert_bytes_.assign(static_cast<std::size_t>(stages), 0);
  const int v = chunks();
  last_gradient_action_.assign(static_cast<std::size_t>(stages * v), 0);
  for (int s = 0; s < stages; ++s) {
    const auto& program = programs_[static_cast<std::size_t>(s)];
    for (std::size_t i = 0; i < program.size(); ++i)
      if (program[i].work == PipeWork::kBackward || program[i].work == PipeWork::kBackwardWeight)
        last_gradient_action_[static_cast<std::size_t>(s * v + program[i].chunk)] = i;
  }
  setup_stage_buffers();
  emit_programs();
  finish();
}

void StepBuilder::emit_programs() {
  // Stages take turns, each emitting the actions whose inputs are already emitted, so a producer
  // is always emitted before the transfer and the pass that consume it.
  const int stages = shape().stages();
  std::vector<std::size_t> pc(static_cast<std::size_t>(stages), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      const auto& program = programs_[static_cast<std::size_t>(s)];
      auto& i = pc[static_cast<std::size_t>(s)];
      for (bool ready = true; i < program.size(); ++i) {
        input_of(s, program[i], ready);
        if (ready && program[i].overlaps_next) input_of(s, program[i + 1], ready);  // launched together
        if (!ready) break;
        emit(s, i);
        progress = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s)
    if (pc[static_cast<std::size_t>(s)] != programs_[static_cast<std::size_t>(s)].size())
      throw InternalError("pipeline schedule " + std::string(to_string(shape().schedule)) + " deadlocks: stage " +
                          std::to_string(s) + " waits at action " + std::to_string(pc[static_cast<std::size_t>(s)]));
}

}  // namespace

StepGraph build_step_graph(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec) {
  StepShape shape = derive_step_shape(model, cluster, spec);
  // ZB-H1 splits every backward, DualPipe some: a split one's W would need what recomputation
  // re-created for its B kept alive until then.
  const bool splits_backward =
      shape.schedule == PipelineSchedule::kZeroBubbleH1 || shape.schedule == PipelineSchedule::kDualPipe;
  // Each stage's per-layer weight all-gathers would run over both mirror stages' shards: not modelled.
  if (shape.schedule == PipelineSchedule::kDualPipe && spec.zero_stage == 3)
    throw InputError("--schedule dualpipe with --zero 3: ZeRO-3's per-layer weight gathers over the two "
                     "copies of each model part are not modelled; use --zero 0, 1 or 2");
  if (splits_backward && spec.recompute != Recompute::kNone)
    throw InputError("--schedule " + std::string(to_string(shape.schedule)) + " with --recompute " +
                     std::string(to_string(spec.recompute)) +
                     ": the weight-gradient pass needs the activations recomputation re-creates for the input "
                     "gradient pass; use --recompute none");
  StepGraph out{shape, TaskGraph(shape.layout.gpus, stage_ranks(shape)), {}, {}, {}, {}};
  StepBuilder builder(model, spec, out);
  builder.build();
  out.routing = builder.routing();
  return out;
}

}  // namespace moesim
