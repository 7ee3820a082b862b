// Emitter: how a block appends tasks, buffers and edges to a TaskGraph, on every simulated rank at
// once, under one naming convention:
//   tasks    `L<layer>.<pass>.<rest>[.c<chunk>]` (L0.fwd.fc1.c2, L0.bwd.gate.wgrad); a collective's
//            rest ends with its group's suffix where the layout has several (rank_groups.h);
//   buffers  `L<layer>.<name>[.c<chunk>]` (L0.T_DI.slot1, L0.bwd.dA.c0).
// During a checkpointed layer's re-run (RerunScope) ids and names are prefixed `recompute.`
// (L0.bwd.recompute.fc1.c0, L0.recompute.T_M), local tasks are in stage recompute and the
// all-to-alls in redispatch / recombine.
//
// Tasks appear in the graph in the order they are emitted, which is each stream's issue order
// (task_graph.h): a block's code order is its schedule.
//
// The emitter also knows what varies per rank under imbalanced routing: each simulated rank's
// RankLoad (the rows it sends and receives per chunk) and the per-chunk traffic of the
// all-to-allv, so a block sizes its work and buffers with a function of the load.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/build/handles.h"
#include "sim/build/layer_dims.h"
#include "sim/build/rank_groups.h"
#include "sim/build/slot_pool.h"
#include "sim/graph/task_graph.h"
#include "sim/routing/routing.h"

namespace moesim {

// Rows one rank sends (its tokens' choices, to every expert) and receives (for its local experts)
// per chunk. Uniform routing pads every (source, expert) pair to C/n rows per chunk; a routing
// plan gives the routed rows, different on every rank.
struct RankLoad {
  std::vector<std::int64_t> sent, received;  // per chunk
  std::int64_t sent_total = 0;
  std::int64_t received_total = 0;
  std::int64_t received_max = 0;  // the largest chunk: what a slot buffer must hold

  std::int64_t received_in(int chunk) const { return received[static_cast<std::size_t>(chunk)]; }
};

class Emitter {
 public:
  using SizeOf = std::function<std::int64_t(const RankLoad&)>;
  using WorkOf = std::function<Work(const RankLoad&)>;
  using CollectiveWorkOf = std::function<CollectiveWork(GroupId)>;

  // `routing`: the layer's routing plan, or null for uniform routing.
  Emitter(TaskGraph& graph, const LayerDims& dims, const RoutingPlan* routing);

  const LayerDims& dims() const { return d_; }
  const RankGroups& groups() const { return groups_; }

  // While alive, what is emitted belongs to a checkpointed layer's re-run (see the header).
  class RerunScope {
   public:
    explicit RerunScope(Emitter& e) : e_(e) { e_.rerun_ = true; }
    ~RerunScope() { e_.rerun_ = false; }
    RerunScope(const RerunScope&) = delete;
    RerunScope& operator=(const RerunScope&) = delete;

   private:
    Emitter& e_;
  };
  bool rerunning() const { return rerun_; }

  // Buffers: `L{layer}.{name}[.c{chunk}]` on every simulated rank, of size_of(its load) bytes, or
  // the same `bytes` on every rank.
  Buf buffer_each(int layer, const std::string& name, int chunk, const SizeOf& size_of, MemoryCategory category,
                  bool resident = false);
  Buf buffer(int layer, const std::string& name, int chunk, std::int64_t bytes, MemoryCategory category,
             bool resident = false);
  // A pool of `count` slot buffers `L{layer}.{tensor}.slot{i}` of size_of(load) bytes each
  // (slot_pool.h); the writer of position q reuses the slot of q - distance.
  SlotPool slot_pool(int layer, const std::string& tensor, int count, int distance, const SizeOf& size_of,
                     MemoryCategory category);

  // A task on every simulated rank's `stream`, its work work_of(that rank's load). Its op is
  // op_for(work, kernel) (op.h): the work's own for a GEMM, a copy or a collective, `kernel` (which
  // memory-bound kernel it is) for elementwise work.
  Node local_each(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                  StreamClass stream, const WorkOf& work_of, const Uses& uses, Op kernel = Op::kElementwise);
  // A compute task of the same work on every rank, or of work_of(load).
  Node compute(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk, const Work& work,
               const Uses& uses = {}, Op kernel = Op::kElementwise);
  Node compute_each(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                    const WorkOf& work_of, const Uses& uses = {}, Op kernel = Op::kElementwise);
  // A copy of `cols` columns of the rows the rank received in `chunk` (an expert tensor's chunk),
  // on the copy stream of its direction.
  Node copy(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk, std::int64_t cols,
            CopyDirection direction, const Uses& uses);

  // One collective task per distinct `kind` group among the simulated ranks, in the order of their
  // first simulated member; Node[s] is the task of simulated rank s's group. A task allocates and
  // frees the listed buffers of its simulated members. work_of(group id) gives its work.
  Node collective(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                  StreamClass stream, GroupKind kind, const CollectiveWorkOf& work_of, const Uses& uses = {});
  // A collective of `op` over `kind` groups whose whole tensor is `bytes` on each member: each
  // member contributes ceil(bytes / group size) (CollectiveWork's convention).
  Node group_collective(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                        StreamClass stream, GroupKind kind, CollectiveOp op, std::int64_t bytes,
                        const Uses& uses = {});
  // A chunk's all-to-all over the expert-parallel group: `to_experts` for the dispatch direction
  // (the dispatch, the re-dispatch, the gradient of the combine), else back to the tokens' ranks.
  Node all_to_all(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                  StreamClass stream, bool to_experts, const Uses& uses = {});

  // Operand bindings (task.h): on every simulated rank, `task` reads or writes range_of(that
  // rank's load) = {offset, bytes} of `buf`, in the layer's storage type; nothing where either is
  // absent or the range is empty (a chunk a rank receives no rows in). A collective binds each
  // simulated member's buffer.
  using RangeOf = std::function<std::pair<std::int64_t, std::int64_t>(const RankLoad&)>;
  void bind(const Node& task, TaskGraph::Access access, const Buf& buf, const RangeOf& range_of);
  // The range of chunk c's rows, `cols` wide, in a buffer: the whole start of a slot (`in_slot`)
  // or, in a full-size expert tensor, after the rows of the chunks before it.
  RangeOf chunk_rows(int chunk, std::int64_t cols, bool in_slot) const;

  // A dependency from every rank's `from` to its `to`; none when either end is absent.
  void edge(const Node& from, const Node& to, DepKind kind = DepKind::kData);

  // Work and sizes in the layer's element size and GEMM dtype.
  GemmWork gemm(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                GemmLayout layout = GemmLayout::kNN) const;
  ElementwiseWork elementwise(std::int64_t read_elems, std::int64_t written_elems, std::int64_t flops) const;
  std::int64_t bytes(std::int64_t rows, std::int64_t cols) const;
  // Rows per local expert in a chunk, for the batched expert GEMMs: exact under uniform routing;
  // with a routing plan the chunk's rows are spread over the local experts (a grouped GEMM does
  // the same FLOP; rows are rounded up per expert).
  std::int64_t expert_rows(const RankLoad& load, int chunk) const;

 private:
  std::string task_id(int layer, Pass pass, const std::string& rest, int chunk) const;
  std::string buffer_name(int layer, const std::string& name, int chunk) const;

  TaskGraph& g_;
  const LayerDims& d_;
  RankGroups groups_;
  std::vector<RankLoad> loads_;                                // per simulated rank, in simulated_ranks() order
  std::vector<std::shared_ptr<const TrafficMatrix>> traffic_;  // per chunk, with a routing plan
  bool rerun_ = false;
};

}  // namespace moesim
