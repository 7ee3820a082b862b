// build_moe_graph: the MoE model as a layer stack of MoE blocks with their policies.
#include <optional>
#include <string>
#include <vector>

#include "sim/build/checkpointing.h"
#include "sim/build/emitter.h"
#include "sim/build/grad_sync.h"
#include "sim/build/layer_stack.h"
#include "sim/build/memory_reuse.h"
#include "sim/build/moe_graph.h"
#include "sim/build/moe_layer_block.h"
#include "sim/build/ordering.h"
#include "sim/build/shared_experts.h"
#include "sim/build/tensor_parallel.h"
#include "sim/core/error.h"

namespace moesim {

namespace {

// The policies are made once and decorate every layer's block; one MoE block serves every layer.
void emit_moe_stack(const ModelSpec& model, const RunSpec& run, const LayerDims& dims, TaskGraph& graph,
                    bool single_comm_stream, const RoutingPlan* routing) {
  Emitter emitter(graph, dims, routing);
  const bool reuse = run.strategy != MemoryStrategy::kNone;
  const Ordering ordering(run.order, dims.num_chunks, run.slots, reuse, single_comm_stream);
  TensorParallel tensor_parallel(emitter);
  MemoryReuse memory(emitter, run);
  Checkpointing checkpointing(emitter, run);
  SharedExperts shared(emitter, model, ordering, tensor_parallel);
  GradientSync grad_sync(emitter, run, layer_model_state_bytes(model, dims, run.optimizer, run.zero_stage));
  MoeLayerBlock moe(emitter, model, run,
                    MoePolicies{ordering, tensor_parallel, memory, checkpointing, shared, grad_sync});
  const std::vector<Block*> blocks(static_cast<std::size_t>(run.num_moe_layers), &moe);
  emit_layer_stack(emitter, blocks);
}

}  // namespace

TaskGraph build_moe_graph(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                          const BuildOptions& options, const RoutingPlan* routing) {
  const LayerDims dims = derive_layer_dims(model, cluster, run);
  std::optional<RoutingPlan> own_routing;
  if (routing == nullptr && !run.routing.balanced()) {
    own_routing = make_layer_routing(dims, run);
    routing = &*own_routing;
  }
  if (routing != nullptr) {
    const RoutingShape& shape = routing->shape();
    MOESIM_CHECK(shape.ranks == dims.ep_size && shape.experts == dims.num_experts &&
                     shape.chunks == dims.num_chunks && shape.capacity == dims.capacity,
                 "the routing plan was made for other layer sizes");
  }
  const GraphSize size = estimate_graph_size(dims, run, options, routing != nullptr);
  if (size.tasks > kMaxGraphTasks) {
    throw InputError("the task graph would have about " + std::to_string(size.tasks) + " tasks (" +
                     std::to_string(run.num_moe_layers) + " layers x " + std::to_string(size.simulated_ranks) +
                     " simulated ranks x " + std::to_string(dims.num_chunks) +
                     " chunks), more than the limit of " + std::to_string(kMaxGraphTasks) +
                     "; simulate fewer layers, chunks or ranks");
  }
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(size.simulated_ranks); ++r) ranks.push_back(r);
  TaskGraph graph(size.world, std::move(ranks));
  emit_moe_stack(model, run, dims, graph, options.single_comm_stream, routing);
  return graph;
}

}  // namespace moesim
