#include "sim/step/optimizer_step.h"

#include <algorithm>
#include <string>

namespace moesim {
namespace {

// Megatron's main gradients and master weights are fp32.
constexpr std::int64_t kFp32 = 4;

TaskName stage_task(int stage, const char* name) {
  return {"stage" + std::to_string(stage), 0, Pass::kBackward, name, "optimizer"};
}

// A memory-bound kernel reading and writing `read` and `written` bytes a parameter over `params`
// parameters, `flops` FLOPs a parameter.
ElementwiseWork per_param(double params, std::int64_t read, std::int64_t written, std::int64_t flops) {
  ElementwiseWork w;
  w.bytes_read = static_cast<std::int64_t>(static_cast<double>(read) * params);
  w.bytes_written = static_cast<std::int64_t>(static_cast<double>(written) * params);
  w.flops = static_cast<std::int64_t>(static_cast<double>(flops) * params);
  return w;
}

}  // namespace

double optimizer_shard_params(const StepShape& shape, int zero_stage, int stage, double dense_params,
                              double expert_params) {
  if (zero_stage < 1) return dense_params + expert_params;
  return dense_params / static_cast<double>(shape.data_group(stage).size()) +
         expert_params / static_cast<double>(shape.expert_data_group(stage).size());
}

void OptimizerStep::zero_grad_buffers(const std::vector<std::int64_t>& grad_buffer_bytes) {
  for (int s = 0; s < shape().stages(); ++s) {
    // DistributedDataParallel.zero_grad_buffer (_ParamAndGradBuffer.reset: grad_data.zero_()),
    // called by train_step before forward_backward_func: a memset of the fp32 gradient buffer.
    // Emitted first on the compute stream, so every pass of the stage follows it.
    Chain chain{s, -1, std::nullopt};
    ElementwiseWork memset;
    memset.bytes_written = grad_buffer_bytes[static_cast<std::size_t>(s)];
    e_.kernel(chain, {"stage" + std::to_string(s), 0, Pass::kForward, "zero_grad_buffer", "optimizer"}, memset);
  }
}

std::vector<std::vector<int>> OptimizerStep::grad_stats_groups(bool experts) const {
  // The distributed optimizer reduces gradient statistics over its instance (every GPU with one
  // instance: intra_dist_opt_group), shared by the dense and expert optimizers. Without it
  // (Float16OptimizerWithFloat16Params, FP32Optimizer) the dense optimizer's group is the
  // model-parallel one (pg_collection.mp: the tensor x pipeline ranks), the experts' tp_ep_pp
  // (the expert rank generator's: etp x ep x pp ranks); groups that differ reduce apart
  // (ChainedOptimizer.get_grad_norm, prepare_grads).
  std::vector<int> all;
  if (zero_stage_ >= 1) {
    for (int r = 0; r < shape().layout.gpus; ++r) all.push_back(r);
    return {all};
  }
  std::vector<int> dense, expert;
  for (int s = 0; s < shape().stages(); ++s) {
    for (int t = 0; t < shape().layout.tp; ++t) dense.push_back(shape().stage_rank(s) + t);
    for (int r : shape().expert_group(s))
      for (int t = 0; t < shape().layout.expert_tp(); ++t) expert.push_back(r + t);
  }
  std::sort(dense.begin(), dense.end());
  std::sort(expert.begin(), expert.end());
  if (!experts || expert == dense) return {dense};
  return {dense, expert};
}

void OptimizerStep::scalar_allreduce(std::vector<Chain>& chains, const std::string& name, bool experts) {
  std::vector<TaskIndex> reductions;
  const auto groups = grad_stats_groups(experts);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::vector<int>& group = groups[i];
    if (group.size() <= 1) continue;
    // One fp32 scalar on each member; CollectiveWork counts an all-reduce's tensor as
    // bytes_per_peer x members, so at least a byte a member.
    const auto members = static_cast<std::int64_t>(group.size());
    Task t;
    t.id = "optimizer." + name + (i == 0 ? "" : ".experts") + ".allreduce";
    t.rank = -1;
    t.stream = StreamClass::kCommGrad;
    t.work = CollectiveWork(CollectiveOp::kAllReduce, e_.graph().add_group(group), (kFp32 + members - 1) / members);
    t.pass = Pass::kBackward;
    t.stage = "optimizer";
    const TaskIndex index = e_.graph().add_task(std::move(t));
    for (const Chain& c : chains)
      if (c.last) e_.graph().add_dependency(*c.last, index);
    reductions.push_back(index);
  }
  // The optimizer reads the result on the host (found_inf's and the norm's .item()): the
  // reduction's, or with no group to reduce over each stage's own statistic kernel's.
  if (reductions.empty()) {
    for (const Chain& c : chains)
      if (c.last) e_.host_reads(*c.last);
    return;
  }
  // Every group holds every stage's rank, whose comm.grad stream runs the reductions in order:
  // each stage's next kernel waits for the last.
  for (Chain& c : chains) c.last = reductions.back();
  e_.host_reads(reductions.back());
}

void OptimizerStep::step(const std::vector<StageOptimizerInput>& stages) {
  const int n = shape().stages();
  const std::int64_t element = shape().element_bytes;
  std::vector<Chain> chains;
  std::vector<double> shard;
  for (int s = 0; s < n; ++s) {
    const StageOptimizerInput& in = stages[static_cast<std::size_t>(s)];
    chains.push_back({s, -1, in.last});
    shard.push_back(optimizer_shard_params(shape(), zero_stage_, s, in.dense_params, in.expert_params));
  }
  bool first = true;  // the step's first kernel waits for the stage's gradient reductions
  auto each = [&](const char* name, std::int64_t read, std::int64_t written, std::int64_t flops) {
    for (int s = 0; s < n; ++s) {
      const auto st = static_cast<std::size_t>(s);
      const TaskIndex k = e_.kernel(chains[st], stage_task(s, name), per_param(shard[st], read, written, flops));
      if (first)
        for (TaskIndex r : stages[st].after) e_.graph().add_dependency(r, k);
    }
    first = false;
  };
  bool experts = false;
  for (const StageOptimizerInput& in : stages) experts = experts || in.expert_params > 0;
  if (loss_scaled_) {
    each("unscale", kFp32, kFp32, 1);  // _unscale_main_grads_and_check_for_nan
    scalar_allreduce(chains, "found_inf", experts);
  }
  each("grad_norm", kFp32, 0, 2);  // get_grad_norm_fp32: multi_tensor_l2norm
  scalar_allreduce(chains, "grad_norm", experts);
  each("clip", kFp32, kFp32, 1);         // clip_grad_by_total_norm_fp32: multi_tensor_scale_tensor
  each("adam", 4 * kFp32, 3 * kFp32, 10);  // FusedAdam.step: weights, grad, two moments in; three out
  if (element < kFp32) each("copy_main_to_model", kFp32, element, 1);  // _copy_main_params_to_model_params
  // One all-gather per set of replica stages (DualPipe's mirror pair holds the same parameters,
  // sharded over both): the lead stage's, after every replica's step.
  for (int s = 0; s < n; ++s) {
    const std::vector<int> replicas = shape().replica_stages(s);
    if (replicas.front() != s) continue;
    std::vector<TaskIndex> others;
    for (std::size_t k = 1; k < replicas.size(); ++k)
      if (const auto last = chains[static_cast<std::size_t>(replicas[k])].last) others.push_back(*last);
    weight_allgather(chains[static_cast<std::size_t>(s)], stages[static_cast<std::size_t>(s)], others);
  }
}

void OptimizerStep::weight_allgather(Chain chain, const StageOptimizerInput& in, const std::vector<TaskIndex>& after) {
  if (zero_stage_ < 1 || zero_stage_ >= 3) return;
  const int s = chain.stage;
  const auto dense_group = shape().data_group(s);
  const auto expert_group = shape().expert_data_group(s);
  const double dense_shard = in.dense_params / static_cast<double>(dense_group.size());
  const double expert_shard = in.expert_params / static_cast<double>(expert_group.size());
  Chain dense = chain, experts = chain;
  const auto wait_for_replicas = [&](std::optional<TaskIndex> gather) {
    if (gather && gather != chain.last)
      for (TaskIndex t : after) e_.graph().add_dependency(t, *gather);
  };
  wait_for_replicas(e_.collective(dense, {"stage" + std::to_string(s), 0, Pass::kBackward, "weights.allgather", "grad"},
                                  StreamClass::kCommGrad, CollectiveOp::kAllGather, dense_group,
                                  static_cast<std::int64_t>(dense_shard * static_cast<double>(shape().element_bytes))));
  if (expert_shard > 0)
    wait_for_replicas(
        e_.collective(experts, {"stage" + std::to_string(s), 0, Pass::kBackward, "expert.weights.allgather", "grad"},
                      StreamClass::kCommGrad, CollectiveOp::kAllGather, expert_group,
                      static_cast<std::int64_t>(expert_shard * static_cast<double>(shape().element_bytes))));
}

}  // namespace moesim
