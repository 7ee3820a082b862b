#include "sim/step/step_graph.h"

#include <memory>
#include <optional>
#include <string>

#include "sim/core/error.h"
#include "sim/step/step_builder.h"

namespace moesim {
namespace step_build {

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

void StepBuilder::layer_buffers(int stage, int microbatch, int layer) {
  const std::size_t i = static_cast<std::size_t>(microbatch) * static_cast<std::size_t>(layer_slots()) +
                        static_cast<std::size_t>(layer);
  const std::string prefix = "mb" + std::to_string(microbatch) + ".L" + std::to_string(layer);
  const LayerActivations& act = is_moe_layer(model_, kind_layer(layer)) ? *moe_act_ : *dense_act_;
  if (act.kept_bytes > 0)
    kept_[i] = emitter_.buffer(stage, prefix + ".act", act.kept_bytes, MemoryCategory::kActivations);
  if (spec_.recompute != Recompute::kNone && act.recompute_bytes > 0)
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
    const Gathered gathers = gather_weights(chain, l, Pass::kForward);
    const auto first = static_cast<TaskIndex>(out_.graph.num_tasks());
    layer_.forward(chain, l, some(kept_[mb * static_cast<std::size_t>(layer_slots()) + static_cast<std::size_t>(l)]), "",
                   gathers.ids());
    gathered(chain, gathers, first);
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
    const auto head = static_cast<TaskIndex>(out_.graph.num_tasks());
    mtp_backward(chain, bpart, last_of_chunk);
    ends_.head_backward(chain, bpart, bpart == BackwardPart::kInput ? std::vector<BufferId>{} : some(ends_kept_[2 * mb + 1]));
    note_rest_grads(chain.stage, head);
  }
  for (int l = p.first_layer + p.layers - 1; l >= p.first_layer; --l) backward_layer(chain, l, bpart, last_of_chunk);
  if (bpart != BackwardPart::kWeight) fp8_scaling_update(chain, part, Pass::kBackward);
  if (part == 0 && bpart != BackwardPart::kWeight) {
    const auto embedding = static_cast<TaskIndex>(out_.graph.num_tasks());
    ends_.embedding_backward(chain, some(ends_kept_[2 * mb]));
    note_rest_grads(chain.stage, embedding);
  }
}

void StepBuilder::note_rest_grads(int stage, TaskIndex first) {
  // Any part: a split backward writes the final norm's and the embedding's gradients in its B pass.
  std::optional<TaskIndex>& from = rest_grads_from_[static_cast<std::size_t>(stage)];
  if (spec_.zero_stage < 2 || from || first >= out_.graph.num_tasks()) return;
  from = first;
}

void StepBuilder::backward_layer(Chain& chain, int l, BackwardPart bpart, bool last_of_chunk) {
  const std::size_t i = static_cast<std::size_t>(chain.microbatch) * static_cast<std::size_t>(layer_slots()) +
                        static_cast<std::size_t>(l);
  std::vector<BufferId> frees = some(kept_[i]);
  // ZeRO-3 gathers the weights before the recomputation too, which runs the layer's forward.
  Gathered gathers;
  if (bpart != BackwardPart::kWeight) gathers = gather_weights(chain, l, Pass::kBackward);
  const auto first = static_cast<TaskIndex>(out_.graph.num_tasks());
  if (bpart != BackwardPart::kWeight) {
    if (spec_.recompute == Recompute::kFull) layer_.forward(chain, l, some(recomputed_[i]), "recompute.");
    if (spec_.recompute == Recompute::kSelective)
      layer_.recompute_modules(chain, l, spec_.recompute_modules, some(recomputed_[i]));
  }
  // What recomputation re-created before the input-gradient pass is read by the weight-gradient
  // pass too: a split backward (ZB-H1, DualPipe, DualPipeV) keeps it until its W pass ends, and frees it
  // there with the kept tensors, as zero-bubble schedules that recompute must.
  if (recomputed_[i] != kNoBuffer) frees.push_back(recomputed_[i]);
  layer_.backward(chain, l, bpart, bpart == BackwardPart::kInput ? std::vector<BufferId>{} : frees, gathers.ids());
  if (bpart != BackwardPart::kWeight) gathered(chain, gathers, first);
  if (!spec_.overlap_grad_reduce) note_rest_grads(chain.stage, first);
  const bool emitted = first < out_.graph.num_tasks();
  // ZeRO 2-3's unsharded gradients exist from the pass's first task; a weight pass's first GEMM,
  // after what MoE memory reuse restores for it.
  const TaskIndex grads_from = bpart == BackwardPart::kWeight ? first_gemm_from(first) : first;
  const bool pair = shape().replica_stages(chain.stage).size() > 1;
  if (pair && spec_.zero_stage >= 2 && bpart != BackwardPart::kInput && emitted) {
    std::optional<TaskIndex>& from = pair_grads_from_[static_cast<std::size_t>(chain.stage * layer_slots() + l)];
    if (!from) from = grads_from;
  }
  if (!spec_.overlap_grad_reduce || bpart == BackwardPart::kInput) return;
  // ZeRO 2-3 keep a shard of the gradients: each microbatch's are reduce-scattered (DeepSpeed,
  // FSDP); below, the last microbatch reduces the buffer. DualPipe's two copies reduce once.
  const bool every_microbatch = spec_.zero_stage >= 2 && !pair;
  if (every_microbatch || last_of_chunk)
    reduce_layer_grads(chain, l, last_of_chunk,
                       every_microbatch && emitted ? std::optional<TaskIndex>(grads_from) : std::nullopt);
}

TaskIndex StepBuilder::first_gemm_from(TaskIndex first) const {
  for (TaskIndex i = first; i < out_.graph.num_tasks(); ++i)
    if (std::holds_alternative<GemmWork>(out_.graph.task(i).work)) return i;
  return first;
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
  // DualPipeV holds both on its first stage: one table, nothing to sum.
  if (model_.architecture.tied_embeddings && stages > 1 && shape().schedule != PipelineSchedule::kDualPipe &&
      shape().schedule != PipelineSchedule::kDualPipeV) {
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
  rest_grads_from_.assign(static_cast<std::size_t>(stages), std::nullopt);
  pair_grads_from_.assign(static_cast<std::size_t>(stages * layer_slots()), std::nullopt);
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

namespace {

// A pass's tasks [from, to) in segments, each ending after one of the pass's tensor- or
// expert-parallel collectives (on the dispatch or combine stream): those its next kernel waits for.
std::vector<std::vector<TaskIndex>> collective_segments(const TaskGraph& g, TaskIndex from, TaskIndex to) {
  std::vector<std::vector<TaskIndex>> out(1);
  for (TaskIndex i = from; i < to; ++i) {
    out.back().push_back(i);
    const Task& t = g.task(i);
    if (std::holds_alternative<CollectiveWork>(t.work) &&
        (t.stream == StreamClass::kCommDispatch || t.stream == StreamClass::kCommCombine))
      out.emplace_back();
  }
  return out;
}

}  // namespace

// DualPipe runs an overlapped forward and backward as one interleaved sequence, as its reference
// hand-interleaves the two passes' attention, MLP, dispatch and combine: the forward's kernels up
// to its next collective, then the backward's up to its next, and so on, so that each pass's
// collectives run beside the other pass's kernels (slowed by the node's interference table) and
// no longer wait at the head of the compute stream. Emitted as before, put on the streams in that
// order (TaskGraph::hold_stream_order), and issued by the host in it (StepGraph::interleaved).
void StepBuilder::emit_overlapped(int stage, std::size_t index) {
  TaskGraph& g = out_.graph;
  const auto forward_from = static_cast<TaskIndex>(g.num_tasks());
  g.hold_stream_order();
  emit(stage, index);
  const auto backward_from = static_cast<TaskIndex>(g.num_tasks());
  emit(stage, index + 1);
  const auto end = static_cast<TaskIndex>(g.num_tasks());
  const auto f = collective_segments(g, forward_from, backward_from);
  const auto b = collective_segments(g, backward_from, end);
  StepGraph::Interleaved range{forward_from, {}};
  range.order.reserve(end - forward_from);
  for (std::size_t k = 0; k < std::max(f.size(), b.size()); ++k) {
    if (k < f.size()) range.order.insert(range.order.end(), f[k].begin(), f[k].end());
    if (k < b.size()) range.order.insert(range.order.end(), b[k].begin(), b[k].end());
  }
  g.release_stream_order(range.order);
  // The pair is done when its last task in that order is (the forward's, where it has more segments).
  last_action_task_[static_cast<std::size_t>(stage)] = range.order.back();
  out_.interleaved.push_back(std::move(range));
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
        if (program[i].overlaps_next) {
          emit_overlapped(s, i);
          ++i;
        } else {
          emit(s, i);
        }
        progress = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s)
    if (pc[static_cast<std::size_t>(s)] != programs_[static_cast<std::size_t>(s)].size())
      throw InternalError("pipeline schedule " + std::string(to_string(shape().schedule)) + " deadlocks: stage " +
                          std::to_string(s) + " waits at action " + std::to_string(pc[static_cast<std::size_t>(s)]));
}

}  // namespace step_build

namespace {

std::vector<int> stage_ranks(const StepShape& shape) {
  std::vector<int> out;
  for (int s = 0; s < shape.stages(); ++s) out.push_back(shape.stage_rank(s));
  return out;
}

}  // namespace

StepGraph build_step_graph(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec) {
  StepShape shape = derive_step_shape(model, cluster, spec);
  StepGraph out{shape, TaskGraph(shape.layout.gpus, stage_ranks(shape)), {}, {}, {}, {}, {}};
  step_build::StepBuilder builder(model, spec, out);
  builder.build();
  out.routing = builder.routing();
  return out;
}

std::vector<TaskIndex> issue_order(const StepGraph& g) {
  if (g.interleaved.empty()) return {};
  std::vector<TaskIndex> order(g.graph.num_tasks());
  for (TaskIndex i = 0; i < order.size(); ++i) order[i] = i;
  for (const StepGraph::Interleaved& r : g.interleaved) std::copy(r.order.begin(), r.order.end(), order.begin() + r.first);
  return order;
}

}  // namespace moesim