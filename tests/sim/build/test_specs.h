// Hand-filled specs shared by the graph tests: a small model on a two-node, eight-GPU cluster.
#pragma once

#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim::testing {

inline ModelSpec small_model() {
  ModelSpec m;
  m.name = "tiny";
  m.d_model = 64;
  m.d_ffn = 128;
  m.num_experts = 8;
  m.top_k = 2;
  m.capacity_factor = 1.0;
  m.dtype = DType::kBf16;
  m.gemm_dtype = DType::kBf16;
  m.activation = Activation::kGelu;
  return m;
}

inline ClusterSpec small_cluster() {
  ClusterSpec c;
  c.name = "2x4";
  c.node.gpus_per_node = 4;
  c.num_nodes = 2;
  return c;
}

// B = 96 tokens, k = 2, f = 1, E = 8: C = 24, a multiple of every n in {1, 2, 3, 4, 6, 8}.
inline RunSpec small_run(int chunks = 1, OrderPolicy order = OrderPolicy::kMPipeMoE, int ep = 0) {
  RunSpec r;
  r.tokens_per_gpu = 96;
  r.ep_size = ep;
  r.num_chunks = chunks;
  r.order = order;
  return r;
}

inline constexpr OrderPolicy kAllPolicies[] = {OrderPolicy::kSequential, OrderPolicy::kMPipeMoE,
                                               OrderPolicy::kFasterMoE, OrderPolicy::kTutel};

inline constexpr MemoryStrategy kAllStrategies[] = {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2,
                                                    MemoryStrategy::kS3, MemoryStrategy::kS4};

// small_cluster with PCIe links, for the strategies that offload.
inline ClusterSpec cluster_with_pcie() {
  ClusterSpec c = small_cluster();
  c.node.pcie_h2d.bandwidth = 25e9;
  c.node.pcie_d2h.bandwidth = 25e9;
  return c;
}

}  // namespace moesim::testing
