// Closed-form memory sizes used by the builder: model states of one MoE layer on one rank.
//
// Parameters per rank: the gate (E x M, replicated), the E_l local experts (M x fc1_out for FC1,
// H x M for FC2) and the shared experts; biases are not counted (MPipeMoE Eq. 1 has none).
// fp32 training (the papers' accounting): 4 bytes each for parameters and gradients and 4 per
// optimizer state, so Adam gives 4 x parameters x 4 bytes (Eq. 1). Mixed precision (bf16/fp16
// dtype): 2 + 2 bytes for parameters and gradients, plus an fp32 master copy (4) and fp32 optimizer
// states: 16 bytes per parameter with Adam (ZeRO's accounting).
#pragma once

#include <cstdint>

#include "sim/graph/moe_layer_builder.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/types.h"

namespace moesim {

struct ModelStateBytes {
  std::int64_t parameters = 0;        // count, not bytes
  std::int64_t param_bytes = 0;
  std::int64_t grad_bytes = 0;
  std::int64_t optimizer_bytes = 0;   // optimizer states plus the fp32 master copy in mixed precision
  std::int64_t total() const { return param_bytes + grad_bytes + optimizer_bytes; }
};

ModelStateBytes layer_model_state_bytes(const ModelSpec& model, const LayerDims& dims, Optimizer optimizer);

}  // namespace moesim
