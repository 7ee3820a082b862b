#include "sim/build/memory_sizes.h"

#include "sim/core/checked_math.h"

namespace moesim {

ModelStateBytes layer_model_state_bytes(const ModelSpec& model, const LayerDims& dims, Optimizer optimizer,
                                        int zero_stage) {
  const std::int64_t M = dims.d_model;
  const std::int64_t t = dims.tp_size;
  const std::int64_t per_expert =
      checked_add(checked_mul(M, dims.fc1_out), checked_mul(dims.d_ffn, M)) / t;  // t divides d_ffn
  const std::int64_t experts = checked_mul(dims.local_experts, per_expert);
  std::int64_t dense = checked_mul(dims.num_experts, M);  // gate
  if (model.shared_experts.count > 0) {
    const std::int64_t h = checked_mul(model.shared_experts.count, model.shared_experts.d_ffn);
    const std::int64_t fc1_out = model.activation == Activation::kSwiglu ? checked_mul(2, h) : h;
    dense = checked_add(dense, checked_add(checked_mul(M, fc1_out), checked_mul(h, M)) / t);
  }
  const int states = optimizer_states_per_param(optimizer);
  // Bytes of optimizer state (and master copy) per parameter.
  const std::int64_t per_param = model.dtype == DType::kFp32 ? 4 * states : 4 * (1 + states);
  const auto shard = [zero_stage](std::int64_t bytes, std::int64_t group) {
    return zero_stage == 1 ? (bytes + group - 1) / group : bytes;
  };
  ModelStateBytes out;
  out.parameters = checked_add(experts, dense);
  out.expert_parameters = experts;
  out.grad_element_bytes = model.dtype == DType::kFp32 ? 4 : 2;
  out.param_bytes = checked_mul(out.parameters, out.grad_element_bytes);
  out.grad_bytes = checked_mul(out.parameters, out.grad_element_bytes);
  out.optimizer_bytes =
      checked_add(shard(checked_mul(experts, per_param), dims.dp_size),
                  shard(checked_mul(dense, per_param), checked_mul(dims.ep_size, dims.dp_size)));
  return out;
}

ParamLayout param_layout(const LayerDims& d, std::int64_t shared_fc1_out, std::int64_t shared_ffn) {
  const std::int64_t M = d.d_model, eb = d.element_bytes;
  ParamLayout p;
  p.w1 = checked_mul({M, d.num_experts, eb});
  p.w2 = checked_add(p.w1, checked_mul({d.local_experts, M, d.fc1_out_shard(), eb}));
  p.shared_w1 = checked_add(p.w2, checked_mul({d.local_experts, d.d_ffn_shard(), M, eb}));
  p.shared_w2 = checked_add(p.shared_w1, checked_mul({M, shared_fc1_out, eb}));
  p.end = checked_add(p.shared_w2, checked_mul({shared_ffn, M, eb}));
  return p;
}

}  // namespace moesim
