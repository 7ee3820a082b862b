// StepEmitter: how the whole-step builder appends tasks to the graph. Every task of a step runs
// on one pipeline stage's representative rank (step_shape.h), or is a collective over one of its
// groups; ids are `mb<m>.<where>.<pass>.<name>` (mb3.L12.fwd.qkv, mb0.head.bwd.logits.dgrad,
// stage-wide tasks without the microbatch: L12.grad.reduce, optimizer), unique per rank.
//
// A chain is the data dependency a microbatch's pass threads through its kernels: each task
// emitted on a chain depends on the chain's last task and becomes it. Side tasks (weight
// gradients, an overlapped all-gather) depend on the chain without moving it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/graph/task_graph.h"
#include "sim/step/step_shape.h"

namespace moesim {

// What the host model (sim/engine/host_issue.h) needs to know of a step's tasks beyond their ops.
struct HostLaunchNotes {
  // Tasks whose result the host reads (a copy to the host, a value read by `.item()`): the host
  // issues nothing after one until it ends.
  std::vector<TaskIndex> host_reads;
  // The MoE experts' GEMMs, one per local expert (the task's GEMM batch), which the framework
  // launches one by one (Transformer Engine's GroupedLinear calls cuBLAS once per expert).
  std::vector<TaskIndex> grouped_gemms;
};

struct Chain {
  int stage = 0;
  int microbatch = -1;         // -1: a stage-wide task
  std::optional<TaskIndex> last;
};

struct TaskName {
  std::string where;  // "L12", "embed", "head", "stage"
  int layer = 0;      // the model layer (the nearest one for the embedding and the head)
  Pass pass = Pass::kForward;
  std::string name;   // "qkv", "tp.allreduce", "recompute.fc1"
  std::string stage;  // the report's stage column ("qkv", "tp", "recompute", "p2p", "grad")
  std::vector<BufferId> allocates = {};  // at the task's start
  std::vector<BufferId> frees = {};      // at its end
  // Which memory-bound kernel an elementwise kernel() is (op.h); other work determines its op.
  Op kernel = Op::kElementwise;
};

// Under current scaling, where a quantisation's absolute maximum (amax) comes from.
struct Fp8Amax {
  // Computed by the kernel that wrote the tensor: TE's layer norm feeding a linear layer
  // (LayerNormLinear) returns it (normalization.cpp, FUSED_NORM_AMAX_FP8), so no pass of its own.
  bool fused = false;
  // The group whose ranks quantise shards of one tensor and all-reduce its amax (MAX, one fp32)
  // first: the tensor-parallel group for the sequence-parallel input of a column-parallel
  // layer and the output gradient of a row-parallel one (TE linear.py, layernorm_linear.py:
  // set_quantizer_amax_reduction_group). Empty: none.
  std::vector<int> reduce_over = {};
};

class StepEmitter {
 public:
  StepEmitter(TaskGraph& graph, const StepShape& shape) : g_(graph), shape_(shape) {}

  const StepShape& shape() const { return shape_; }
  // Marks a task whose result the host reads (HostLaunchNotes).
  void host_reads(TaskIndex task) { launch_notes_.host_reads.push_back(task); }
  const HostLaunchNotes& launch_notes() const { return launch_notes_; }
  TaskGraph& graph() { return g_; }

  // A kernel on the compute stream after the chain; it moves the chain unless `side`. Its op is
  // op_for(work, name.kernel), as are the collectives'; sends() are send_recv.
  TaskIndex kernel(Chain& chain, const TaskName& name, const Work& work, bool side = false);
  // A kernel() of the MoE experts' GEMMs, one per local expert (HostLaunchNotes::grouped_gemms;
  // a batch of one, the shared experts', is one launch and not noted).
  TaskIndex grouped_gemm(Chain& chain, const TaskName& name, const GemmWork& gemm, bool side = false) {
    const TaskIndex task = kernel(chain, name, gemm, side);
    if (gemm.batch > 1) launch_notes_.grouped_gemms.push_back(task);
    return task;
  }
  // A host <-> device copy on its direction's copy stream after the chain (moves the chain).
  TaskIndex copy(Chain& chain, const TaskName& name, const CopyWork& work);
  // A collective over `group` (members sorted) on `stream`, after the chain. Returns the chain's
  // last task unchanged, emitting nothing, when the group has one member.
  std::optional<TaskIndex> collective(Chain& chain, const TaskName& name, StreamClass stream, CollectiveOp op,
                                      const std::vector<int>& group, std::int64_t bytes_per_peer,
                                      bool side = false);
  // The same for a tensor of `whole_bytes` on each member: each contributes whole / members, as
  // CollectiveWork counts all-reduce, all-gather, reduce-scatter and uniform all-to-all bytes.
  std::optional<TaskIndex> group_collective(Chain& chain, const TaskName& name, StreamClass stream, CollectiveOp op,
                                            const std::vector<int>& group, std::int64_t whole_bytes,
                                            bool side = false);
  // Point-to-point sends inside `group` as one all-to-allv (NCCL's send/recv): member pairs[i].first
  // sends `bytes` to member pairs[i].second (positions in the sorted group).
  TaskIndex sends(Chain& chain, const TaskName& name, StreamClass stream, const std::vector<int>& group,
                  const std::vector<std::pair<int, int>>& pairs, std::int64_t bytes);
  // An all-to-allv over `group` (members sorted) of `traffic`, whose rows index the members'
  // positions (`transposed`: each pair's rows sent the other way, a combine's). Returns the
  // chain's last task unchanged, emitting nothing, when the group has one member.
  std::optional<TaskIndex> all_to_allv(Chain& chain, const TaskName& name, StreamClass stream,
                                       const std::vector<int>& group, std::shared_ptr<const TrafficMatrix> traffic,
                                       bool transposed);
  // A buffer on a stage's rank, allocated and freed by the tasks whose TaskName lists it.
  BufferId buffer(int stage, const std::string& name, std::int64_t bytes, MemoryCategory category,
                  bool resident = false);

  // A linear layer's GEMM, in the step's GEMM precision (--precision: bf16, or fp8 as Transformer
  // Engine runs linear layers).
  GemmWork gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                GemmLayout layout = GemmLayout::kNN) const;
  // A GEMM that FP8 training keeps in the model's storage dtype: attention's score and context
  // products, the router and the output layer (Megatron-LM quantises Transformer Engine's linear
  // layers only).
  GemmWork storage_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) const;
  bool fp8() const { return shape_.gemm_dtype == DType::kFp8; }
  // Quantising `elems` values of the storage dtype to FP8 for a GEMM: read once, written twice
  // (row-wise for this GEMM and column-wise, transposed, for the other pass's GEMM, as Transformer
  // Engine's cast-transpose does).
  ElementwiseWork fp8_cast(std::int64_t elems) const;
  // The quantisation of `elems` values for a GEMM as the step's FP8 recipe does it; `name` is the
  // cast's task ("qkv.fp8.input"). Current scaling (TE Float8CurrentScalingQuantizer::quantize_impl):
  // an amax kernel reading the tensor (`.amax`, unless fused), the amax all-reduce
  // (`.amax.allreduce`), the scale kernel (`.scale`: nvte_compute_scale_from_amax, one fp32 read
  // and written), then the cast. Delayed scaling: the cast alone, which records the amax for the
  // history (the histories' update is sim/step/fp8_scaling.h).
  TaskIndex fp8_quantize(Chain& chain, const TaskName& name, std::int64_t elems, const Fp8Amax& amax = {});
  // An all-reduce (MAX) of `whole_bytes` of fp32 amaxes over `group` on the tensor-parallel
  // collectives' stream; CollectiveWork counts an all-reduce's buffer per member, so each member's
  // share is rounded up to a whole byte (a 4-byte amax over 8 ranks prices 8 bytes: latency-bound).
  std::optional<TaskIndex> amax_all_reduce(Chain& chain, const TaskName& name, const std::vector<int>& group,
                                           std::int64_t whole_bytes);
  // The quantisation of a linear layer's `elems` weights (name.name is the layer's, e.g. "fc1") in
  // the first forward that reaches them on the chain's stage, kept for the step's other microbatches
  // (Megatron-Core passes is_first_microbatch to Transformer Engine): a buffer of both FP8 copies,
  // alive from the cast on. Later forwards emit nothing. Programs are emitted in each stage's
  // order, so the first call is the stage's first forward of that layer, whichever microbatch
  // (DualPipe's reverse direction starts with the second half's). The weights' amax is not reduced.
  std::optional<TaskIndex> fp8_weight_cast(Chain& chain, TaskName name, std::int64_t elems);
  // A memory-bound kernel over elements of the model's dtype (`mask_elems`: one-byte dropout
  // masks written or read on top).
  ElementwiseWork elementwise(std::int64_t read_elems, std::int64_t written_elems, std::int64_t mask_elems = 0) const;

 private:
  std::string id_of(const Chain& chain, const TaskName& name) const;
  TaskIndex append(Chain& chain, Task task, bool side);
  TaskIndex all_to_allv_task(Chain& chain, const TaskName& name, StreamClass stream, const std::vector<int>& group,
                             std::shared_ptr<const TrafficMatrix> traffic, bool transposed, Op op);

  TaskGraph& g_;
  const StepShape& shape_;
  std::set<std::pair<int, std::string>> fp8_weights_cached_;  // (stage, "L3.fc1")
  HostLaunchNotes launch_notes_;
};

}  // namespace moesim
