// Shared by the tests that run the whole MoE layer on the host emulation (executor, measure(),
// and the mpiexec tests in tests/mpi/): a tiny model and bitwise comparison of results.
#pragma once

#include "plan_test_util.h"
#include "runtime/exec/layer_executor.h"

namespace moesim::runtime::testing {

// d_model 16, d_ffn 24, capacity factor 1: every path of the layer in milliseconds.
inline ModelSpec tiny_model(int experts = 8, int top_k = 2, Activation act = Activation::kGelu) {
  ModelSpec m;
  m.name = "tiny";
  m.d_model = 16;
  m.d_ffn = 24;
  m.num_experts = experts;
  m.top_k = top_k;
  m.capacity_factor = 1.0;
  m.activation = act;
  return m;
}

// The layer's outputs and gradients are bit for bit the same.
inline bool same_results(const RankValues& a, const RankValues& b) {
  return a.y == b.y && a.dx == b.dx && a.dgate == b.dgate && a.dw1 == b.dw1 && a.dw2 == b.dw2;
}

}  // namespace moesim::runtime::testing
