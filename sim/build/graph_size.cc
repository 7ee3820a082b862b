// The size of the MoE layer graph before it is built: the builder refuses graphs over
// kMaxGraphTasks with it, and the simulation's memory estimate (sim/driver/footprint.h) counts it.
#include "sim/core/checked_math.h"
#include "sim/build/moe_graph.h"

namespace moesim {

GraphSize estimate_graph_size(const LayerDims& dims, const RunSpec& run, const BuildOptions& options, bool routed) {
  GraphSize size;
  // A representative rank stands for all only when every rank does the same work.
  const bool representative = options.representative_rank && !routed;
  // The graph's world: one data-parallel replica (the others repeat it), or every GPU when the
  // gradient all-reduces between the replicas are simulated.
  const ParallelLayout layout = dims.layout();
  size.world = run.grad_sync ? layout.world() : layout.replica_size();
  size.simulated_ranks = representative ? 1 : (options.all_replicas ? size.world : layout.replica_size());
  // Per layer and simulated rank about 12 whole-layer tasks and 10 per chunk (14 with a memory
  // strategy's copies or recomputation, 13 with activation checkpointing's re-run) and 2 gradient
  // all-reduces; per chunk and expert-parallel group 4 all-to-alls (5 with re-dispatch, 6 with the
  // re-run's), per tensor-parallel group as many all-gathers with duplicate token dropping and 3
  // all-reduces.
  const std::int64_t simulated = size.simulated_ranks;
  const bool strategy = run.strategy != MemoryStrategy::kNone;
  const bool rerun = run.checkpoint != ActivationCheckpointing::kNone;
  const std::int64_t a2as = strategy ? 5 : (rerun ? 6 : 4);
  const std::int64_t expert_groups = (simulated + dims.ep_size - 1) / dims.ep_size;
  const std::int64_t tensor_groups = dims.tp_size > 1 ? (simulated + dims.tp_size - 1) / dims.tp_size : 0;
  const std::int64_t per_chunk_collectives = checked_add(
      checked_mul(expert_groups, a2as), checked_mul(tensor_groups, (dims.drop_duplicate_tokens ? a2as : 0) + 3));
  const std::int64_t per_rank =
      checked_add(12 + (run.grad_sync ? 2 : 0), checked_mul(strategy || rerun ? 14 : 10, dims.num_chunks));
  size.tasks = checked_mul(run.num_moe_layers,
                           checked_add(checked_mul(simulated, per_rank), checked_mul(per_chunk_collectives, dims.num_chunks)));
  return size;
}

}  // namespace moesim
