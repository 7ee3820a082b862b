#include "sim/graph/memory_sizes.h"

#include "sim/core/checked_math.h"

namespace moesim {

ModelStateBytes layer_model_state_bytes(const ModelSpec& model, const LayerDims& dims, Optimizer optimizer) {
  const std::int64_t M = dims.d_model;
  std::int64_t params = checked_mul(dims.num_experts, M);  // gate
  const std::int64_t per_expert = checked_add(checked_mul(M, dims.fc1_out), checked_mul(dims.d_ffn, M));
  params = checked_add(params, checked_mul(dims.local_experts, per_expert));
  if (model.shared_experts.count > 0) {
    const std::int64_t h = checked_mul(model.shared_experts.count, model.shared_experts.d_ffn);
    const std::int64_t fc1_out = model.activation == Activation::kSwiglu ? checked_mul(2, h) : h;
    params = checked_add(params, checked_add(checked_mul(M, fc1_out), checked_mul(h, M)));
  }
  const int states = optimizer_states_per_param(optimizer);
  ModelStateBytes out;
  out.parameters = params;
  if (model.dtype == DType::kFp32) {
    out.param_bytes = checked_mul(params, 4);
    out.grad_bytes = checked_mul(params, 4);
    out.optimizer_bytes = checked_mul({params, 4, states});
  } else {
    out.param_bytes = checked_mul(params, 2);
    out.grad_bytes = checked_mul(params, 2);
    out.optimizer_bytes = checked_mul({params, 4, 1 + states});  // fp32 master copy + states
  }
  return out;
}

}  // namespace moesim
