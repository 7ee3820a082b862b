// RunSpec: what to simulate for a model on a cluster (command-line flags or a run file).
#pragma once

#include <cstdint>
#include <limits>

#include "sim/spec/routing_spec.h"
#include "sim/spec/types.h"

namespace moesim {

// The ranges a run file's keys, a sweep file's axes and their command-line flags take: wide enough
// for any cluster, narrow enough that products of them stay well inside 64 bits.
inline constexpr std::int64_t kMaxTokensPerGpu = std::int64_t{1} << 40;
inline constexpr int kMaxGroupSize = 1 << 24;  // ep_size, tp_size, GPU counts
inline constexpr int kMaxChunks = 1 << 20;
inline constexpr int kMaxChunkAlignment = 1 << 20;
inline constexpr int kMaxMoeLayers = 100000;
inline constexpr std::uint64_t kMaxSeed = std::numeric_limits<std::int64_t>::max();

struct RunSpec {
  std::int64_t tokens_per_gpu = 0;  // B
  int ep_size = 0;                  // N, expert-parallel group size; 0 = every GPU of the cluster / tp_size
  // DeepSpeed-TED (reference section 5, sim/spec/parallel_layout.h): tensor-parallel degree of the
  // experts and the non-expert blocks (G_tensor); the cluster's GPUs are tp_size x ep_size x
  // data-parallel replicas.
  int tp_size = 1;
  // TED's duplicate token dropping (with tp_size > 1): each tensor-parallel rank sends 1/tp of the
  // tokens its group holds in common through each all-to-all and all-gathers them after it.
  bool drop_duplicate_tokens = true;
  // Simulate the data-parallel gradient all-reduces of the step (expert gradients over the expert
  // data-parallel group, the gate's and shared experts' over the non-expert one) on stream
  // comm.grad. Off by default: the seed papers time a layer's forward and backward without them.
  bool grad_sync = false;
  // ZeRO stage of the optimizer states: 0 keeps them whole on every rank, 1 shards them (and the
  // fp32 master copy of mixed precision) over the data-parallel group of their parameters (TED).
  int zero_stage = 0;
  // Re-run each MoE layer's forward before its backward instead of keeping its activations (full),
  // with TED's communication-aware variant (cac) that stashes the all-to-alls' outputs. Needs
  // strategy none: the MPipeMoE strategies restore what chunk reuse overwrote, a different answer
  // to the same memory problem.
  ActivationCheckpointing checkpoint = ActivationCheckpointing::kNone;
  int num_chunks = 1;               // n, pipeline partitions of each layer
  // Chunk sizes (capacity slots per expert and source) are multiples of this, but for the last
  // chunk, which takes what is left (sim/build/layer_dims.h); 1: sizes differ by at most one.
  int chunk_alignment = 1;
  OrderPolicy order = OrderPolicy::kMPipeMoE;
  int num_moe_layers = 1;           // MoE layers simulated back to back
  std::uint64_t seed = 1;
  MemoryStrategy strategy = MemoryStrategy::kNone;
  int slots = 2;                    // buffer slots per reused tensor with s1-s4: 1 or 2
  Optimizer optimizer = Optimizer::kAdam;
  bool count_routing_data = true;   // gate scores and indices kept for backward (off = the papers' accounting)
  NetworkModel network = NetworkModel::kAuto;              // collective model (docs/network.md)
  ComputeModel compute = ComputeModel::kAuto;              // model of the other tasks (docs/concepts.md)
  AllToAllAlgorithm all_to_all = AllToAllAlgorithm::kPairwise;  // dispatch/combine algorithm (flow model)
  RoutingSpec routing;              // uniform (balanced), zipf:<s> or matrix:<file> (sim/routing)
};

}  // namespace moesim
