// RunSpec: what to simulate for a model on a cluster (command-line flags or a run file).
#pragma once

#include <cstdint>

#include "sim/spec/routing_spec.h"
#include "sim/spec/types.h"

namespace moesim {

struct RunSpec {
  std::int64_t tokens_per_gpu = 0;  // B
  int ep_size = 0;                  // N, expert-parallel group size; 0 = every GPU of the cluster
  int num_chunks = 1;               // n, pipeline partitions of each layer
  OrderPolicy order = OrderPolicy::kMPipeMoE;
  int num_moe_layers = 1;           // MoE layers simulated back to back
  std::uint64_t seed = 1;
  MemoryStrategy strategy = MemoryStrategy::kNone;
  int slots = 2;                    // buffer slots per reused tensor with s1-s4: 1 or 2
  Optimizer optimizer = Optimizer::kAdam;
  bool count_routing_data = true;   // gate scores and indices kept for backward (off = the papers' accounting)
  NetworkModel network = NetworkModel::kAuto;              // collective model (docs/network.md)
  AllToAllAlgorithm all_to_all = AllToAllAlgorithm::kPairwise;  // dispatch/combine algorithm (flow model)
  RoutingSpec routing;              // uniform (balanced), zipf:<s> or matrix:<file> (sim/routing)
};

}  // namespace moesim
