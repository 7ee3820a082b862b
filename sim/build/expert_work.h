// The work of the routed experts' forward kernels on one rank for one chunk, shared by the MoE
// block's forward and the recomputation of memory strategies s3/s4. Under tensor parallelism a
// rank computes its slice: fc1_out/t and H/t wide.
#pragma once

#include "sim/build/emitter.h"
#include "sim/core/checked_math.h"

namespace moesim {

// FC1: E_l GEMMs of the chunk's rows per expert x M by M x F.
inline Emitter::WorkOf expert_fc1_work(const Emitter& e, int chunk) {
  return [&e, chunk](const RankLoad& load) {
    const LayerDims& d = e.dims();
    return Work{e.gemm(d.local_experts, e.expert_rows(load, chunk), d.d_model, d.fc1_out_shard())};
  };
}

// The activation: reads rows x F, writes rows x H; 1 FLOP per output element (memory bound).
inline Emitter::WorkOf expert_activation_work(const Emitter& e, int chunk) {
  return [&e, chunk](const RankLoad& load) {
    const std::int64_t r = load.received_in(chunk);
    const std::int64_t F = e.dims().fc1_out_shard(), H = e.dims().d_ffn_shard();
    return Work{e.elementwise(checked_mul(r, F), checked_mul(r, H), checked_mul(r, H))};
  };
}

}  // namespace moesim
