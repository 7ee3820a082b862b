// build_moe_graph: the task graph of a training step of run.num_moe_layers MoE layers, forward
// and backward, each split into n chunks along tokens. The entry point of the builder; how it is
// made:
//   emitter.h        appends tasks, buffers and edges under the naming convention
//                    L<layer>.<pass>.<stage>[.c<chunk>]; slot_pool.h is the slot rule of reuse;
//   block.h          a layer of the model; layer_stack.h chains blocks forward and backward;
//   moe_layer_block.h  the MoE layer: gate, route, encode, dispatch, experts, combine, decode;
//   policies         ordering.h (issue order and streams of the all-to-alls), memory_reuse.h
//                    (MPipeMoE's S1-S4), checkpointing.h (full, cac), tensor_parallel.h
//                    (DeepSpeed-TED), shared_experts.h, grad_sync.h (with ZeRO-1);
//   layer_dims.h     the layer's sizes, derived and validated once.
#pragma once

#include <cstdint>

#include "sim/build/layer_dims.h"
#include "sim/graph/task_graph.h"
#include "sim/routing/routing.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim {

struct BuildOptions {
  // Simulate one representative rank (balanced routing: every EP rank is symmetric) instead of all.
  // Ignored (every rank is simulated) when the routing is imbalanced.
  bool representative_rank = true;
  // Without a representative rank: simulate the ranks of every data-parallel replica the graph's
  // world holds (run.grad_sync makes the world every GPU), not only those of the first. The
  // replicas repeat the first one's work; only their gradient all-reduces meet it.
  bool all_replicas = false;
  // Put every collective of a rank on one stream (comm.dispatch), as the PipeMoE model's single
  // communication channel. The mpipemoe order then issues its forward like fastermoe (all
  // dispatches, then the combines, bounded by the slots with reuse): on one channel that order
  // gives the model's T(r), while interleaving would queue each combine behind the next dispatch.
  bool single_comm_stream = false;
};

// Largest graph build_moe_graph accepts (a graph this size takes a few GiB).
inline constexpr std::int64_t kMaxGraphTasks = 20'000'000;

// The graph build_moe_graph makes, sized from the dims alone, before anything is allocated.
struct GraphSize {
  int world = 1;                     // ranks of the graph's world: one replica, or every GPU with grad_sync
  std::int64_t simulated_ranks = 1;  // 1 (a representative rank) or the world's ranks
  std::int64_t tasks = 0;            // an upper estimate, within 1.5x of the tasks built (tests)
};
// `routed`: the layer has a routing plan (imbalanced routing), so every rank is simulated.
GraphSize estimate_graph_size(const LayerDims& dims, const RunSpec& run, const BuildOptions& options, bool routed);

// Builds the forward and backward graph of run.num_moe_layers MoE layers. With imbalanced
// routing (run.routing not uniform) every rank is simulated with its own rows: the all-to-alls
// are all-to-allv over `routing`'s per-chunk traffic (made from run.routing when null), the expert
// GEMMs, copies and expert buffers are sized by the rows each rank receives, encode/decode by
// the rows it sends. Throws InputError when the graph would exceed kMaxGraphTasks.
TaskGraph build_moe_graph(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                          const BuildOptions& options = {}, const RoutingPlan* routing = nullptr);

}  // namespace moesim
