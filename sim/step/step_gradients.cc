// StepBuilder's gradient reductions and ZeRO-3's weight gathers (step_builder.h).
#include <algorithm>
#include <string>
#include <vector>

#include "sim/step/step_builder.h"

namespace moesim::step_build {

std::pair<std::int64_t, std::int64_t> StepBuilder::layer_params(int layer) const {
  const LocalLayerParameters p = local_layer_parameters(layer_parameters(model_, kind_layer(layer)), shape().layout.tp,
                                                       shape().layout.ep, shape().layout.expert_tp());
  return {p.dense, p.expert};
}

void StepBuilder::reduce_layer_grads(const Chain& chain, int l, bool counted, std::optional<TaskIndex> unsharded_from) {
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
  // ZeRO 2-3: the layer's whole gradients live from its backward until their reduce-scatter has
  // left each rank its shard, which is all the model states count of them: per microbatch, or
  // (DualPipe, ZeRO 2) on each copy's stage from its first weight gradients to the one reduction.
  std::vector<std::pair<int, TaskIndex>> holders;
  if (unsharded_from) holders.emplace_back(chain.stage, *unsharded_from);
  if (first_copy)
    for (int s : stages)
      if (const auto& from = pair_grads_from_[static_cast<std::size_t>(s * layer_slots() + l)]) holders.emplace_back(s, *from);
  auto reduce = [&](const std::vector<int>& group, std::int64_t bytes, const std::string& what,
                    std::vector<std::int64_t>& reduced) {
    if (group.size() <= 1 || bytes == 0) return;
    Chain side = chain;
    TaskName name{"L" + std::to_string(l), l, Pass::kBackward, what + ".reduce", "grad"};
    for (const auto& [stage, from] : holders) {
      const std::string owner = first_copy ? "stage" + std::to_string(stage) : "mb" + std::to_string(chain.microbatch);
      name.frees.push_back(unsharded_grads(stage, owner + ".L" + std::to_string(l) + "." + what, bytes, from));
    }
    const auto task = emitter_.group_collective(side, name, StreamClass::kCommGrad, op, group, bytes, true);
    also_after(task, chain.last, {first_copy});
    for (int s : stages) {
      grad_reductions_[static_cast<std::size_t>(s)].push_back(*task);
      if (counted) reduced[static_cast<std::size_t>(s)] += bytes;
    }
  };
  reduce(shape().data_group(chain.stage), dense, "grad", reduced_dense_bytes_);
  reduce(shape().expert_data_group(chain.stage), expert, "expert.grad", reduced_expert_bytes_);
}

BufferId StepBuilder::unsharded_grads(int stage, const std::string& owner, std::int64_t bytes, TaskIndex from) {
  const BufferId grads = emitter_.buffer(stage, owner + ".unsharded", bytes, MemoryCategory::kTemporary);
  out_.graph.allocate_at(from, grads);
  return grads;
}

std::vector<BufferId> StepBuilder::Gathered::ids() const {
  std::vector<BufferId> out = some(dense);
  if (expert != kNoBuffer) out.push_back(expert);
  return out;
}

StepBuilder::Gathered StepBuilder::gather_weights(const Chain& chain, int l, Pass pass) {
  Gathered out;
  if (spec_.zero_stage < 3) return out;
  const auto [dense, expert] = layer_params(l);
  const std::int64_t element = shape().element_bytes;
  const std::string prefix = "mb" + std::to_string(chain.microbatch) + ".L" + std::to_string(l) + "." +
                             std::string(to_string(pass)) + ".";
  const std::optional<TaskIndex> previous = previous_layer_start_[static_cast<std::size_t>(chain.stage)];
  auto gather = [&](const std::vector<int>& group, std::int64_t params, const char* what, const char* buffer_name) {
    if (group.size() <= 1 || params == 0) return kNoBuffer;
    // The whole layer's weights (every replica's shard) in the model's dtype, as the gather writes them.
    const BufferId buffer = emitter_.buffer(chain.stage, prefix + buffer_name, params * element, MemoryCategory::kTemporary);
    Chain side{chain.stage, chain.microbatch, previous};
    TaskName name{"L" + std::to_string(l), l, pass, what, "zero3"};
    name.allocates = some(buffer);
    out.tasks.push_back(*emitter_.group_collective(side, name, StreamClass::kCommGrad, CollectiveOp::kAllGather, group,
                                                   params * element, true));
    return buffer;
  };
  out.dense = gather(shape().data_group(chain.stage), dense, "weights.allgather", "weights.gathered");
  out.expert = gather(shape().expert_data_group(chain.stage), expert, "expert.weights.allgather", "expert.weights.gathered");
  return out;
}

void StepBuilder::gathered(const Chain& chain, const Gathered& gathers, TaskIndex first) {
  if (spec_.zero_stage < 3) return;
  for (TaskIndex g : gathers.tasks) out_.graph.add_dependency(g, first);
  previous_layer_start_[static_cast<std::size_t>(chain.stage)] = first;
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
  // ZeRO 2-3: on each stage (DualPipe: both of the pair), the whole gradients are a buffer from
  // the first task that writes them until this reduce-scatter.
  auto reduce = [&](const std::vector<int>& group, std::int64_t rest, const char* what) {
    if (rest <= 0 || group.size() <= 1) return;
    Chain grad = chain;
    TaskName name{"stage" + std::to_string(lead), 0, Pass::kBackward, what, "grad"};
    for (int s : stages) {
      const std::optional<TaskIndex>& from = rest_grads_from_[static_cast<std::size_t>(s)];
      if (from) name.frees.push_back(unsharded_grads(s, "stage" + std::to_string(s) + "." + what, rest, *from));
    }
    const auto task = emitter_.group_collective(grad, name, StreamClass::kCommGrad, op, group, rest, true);
    also_after(task, chain.last, others);
    for (int s : stages) grad_reductions_[static_cast<std::size_t>(s)].push_back(*task);
  };
  reduce(shape().data_group(lead), kGradBytes * static_cast<std::int64_t>(stage_dense_params_[st]) - reduced_dense_bytes_[st],
         "grad.reduce");
  reduce(shape().expert_data_group(lead),
         kGradBytes * static_cast<std::int64_t>(stage_expert_params_[st]) - reduced_expert_bytes_[st], "expert.grad.reduce");
}

}  // namespace moesim::step_build
