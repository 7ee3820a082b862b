// OptimizerStep: what Megatron-LM's iteration does to the gradients and weights outside the
// forward and backward passes, as tasks (issue 23). Megatron-Core (NVIDIA/Megatron-LM
// d98e8a6, megatron/core/optimizer/optimizer.py, clip_grads.py, distrib_optimizer.py,
// distributed/distributed_data_parallel.py), bf16 or fp16 weights with fp32 main gradients
// (--accumulate-allreduce-grads-in-fp32, on for bf16), the defaults clip_grad 1.0 and
// log_num_zeros_in_grad off; ZeRO 1-3 stand for the distributed optimizer.
//
// At the start of the iteration, before the first forward:
//   zero_grad_buffer   DistributedDataParallel.zero_grad_buffer -> _ParamAndGradBuffer.reset:
//                      grad_data.zero_() writes the rank's fp32 gradient buffer (the grads the
//                      step's model states hold, 4 bytes a local parameter, 4 / replicas with
//                      ZeRO 2-3).
// After the gradient reductions (MixedPrecisionOptimizer.step, per GPU over the parameters it
// updates: its shard with ZeRO >= 1, all its local parameters with ZeRO 0; S = that count):
//   prepare_grads      _copy_model_grads_to_main_grads: the shard's main grad is a view of the
//                      fp32 buffer (`.float()` of an fp32 tensor copies nothing): no task.
//   unscale (fp16)     _unscale_main_grads_and_check_for_nan: _amp_foreach_non_finite_check_and_
//                      unscale_ reads and writes 4S bytes, then an all-reduce (MAX) of the 4-byte
//                      found_inf over the grad-stats group. bf16 and fp32 have no grad scaler:
//                      none of it.
//   grad_norm          get_grad_norm_fp32: multi_tensor_l2norm reads 4S bytes, then an all-reduce
//                      (SUM) of the 4-byte squared norm over the grad-stats group: every GPU with
//                      the distributed optimizer (one instance; one norm for dense and expert
//                      parameters, ChainedOptimizer.get_grad_norm with a shared group); without
//                      it the model-parallel group (tensor x pipeline ranks), and for routed
//                      experts over ep > 1 a second all-reduce over tensor x expert x pipeline.
//   clip               clip_grad_by_total_norm_fp32: with Transformer Engine the coefficient is a
//                      tensor and multi_tensor_scale_tensor scales every grad (4S read, 4S
//                      written) whatever the norm.
//   adam               step_with_ready_grads -> FusedAdam.step over fp32 master weights: reads
//                      weights, grads and both moments (16S), writes weights and moments (12S).
//   copy to model      _copy_main_params_to_model_params: reads the fp32 master (4S), writes the
//                      model's dtype (2S); none for an fp32 model (FP32Optimizer, no master copy).
//   weight all-gather  DistributedOptimizer.start_param_sync (ZeRO 1-2): the updated shards back
//                      to every replica; ZeRO 3 gathers each layer's before its pass instead.
// Every kernel is priced as the compute model prices memory-bound work (launch + bytes over HBM
// bandwidth or FLOPs over the fp32 peak); multi_tensor_apply's several launches count as one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/step/step_emitter.h"

namespace moesim {

// What the optimizer of one stage's GPU updates and when it may start.
struct StageOptimizerInput {
  std::optional<TaskIndex> last;        // the stage's last task of its passes
  std::vector<TaskIndex> after;         // its gradient reductions (and the tied embedding's)
  double dense_params = 0;              // per GPU, local (after tensor/pipeline parallelism)
  double expert_params = 0;             // per GPU, local (after expert/tensor parallelism)
};

// Per GPU, the parameters of a stage the optimizer updates: its shard (ZeRO >= 1) or all of them.
double optimizer_shard_params(const StepShape& shape, int zero_stage, int stage, double dense_params,
                              double expert_params);

class OptimizerStep {
 public:
  // `loss_scaled`: fp16 weights, whose gradients Megatron scales (DynamicGradScaler).
  OptimizerStep(StepEmitter& emitter, int zero_stage, bool loss_scaled)
      : e_(emitter), zero_stage_(zero_stage), loss_scaled_(loss_scaled) {}

  // zero_grad_buffer on each stage's compute stream; call before any other task of the step.
  void zero_grad_buffers(const std::vector<std::int64_t>& grad_buffer_bytes);
  // The step of every stage (one entry a stage), after its input's tasks.
  void step(const std::vector<StageOptimizerInput>& stages);

 private:
  const StepShape& shape() const { return e_.shape(); }
  // An all-reduce of one fp32 scalar over each grad-stats group after every chain; each chain
  // then continues after it. Ids optimizer.<name>.allreduce (.experts.allreduce for the second).
  void scalar_allreduce(std::vector<Chain>& chains, const std::string& name, bool experts);
  // The groups the gradient statistics reduce over: one, or with ZeRO 0 and routed experts
  // spread over ep the dense optimizer's and the experts' when they differ.
  std::vector<std::vector<int>> grad_stats_groups(bool experts) const;
  // ZeRO 1-2: the updated shards gathered back to every replica after the step (and after the
  // tasks `after`: the other replica stages' steps).
  void weight_allgather(Chain chain, const StageOptimizerInput& in, const std::vector<TaskIndex>& after);

  StepEmitter& e_;
  int zero_stage_;
  bool loss_scaled_;
};

}  // namespace moesim
