// Task: one node of moesim's IR (design.md section 3).
//
// A task has a stable id saying what it is (`L0.fwd.fc1.c2`: layer, pass, stage, chunk), a kind
// derived from its work, where it runs (one rank's stream, or a collective's group on every
// member's stream) and its work: a GEMM shape, bytes of an elementwise kernel, a collective's
// per-peer bytes, a copy's bytes and direction, or a fixed host delay.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sim/core/units.h"
#include "sim/graph/buffer.h"
#include "sim/graph/op.h"
#include "sim/spec/types.h"

namespace moesim {

using TaskIndex = std::uint32_t;
using GroupId = std::uint32_t;

enum class TaskKind { kGemm, kElementwise, kCollective, kCopy, kHost };
std::string_view to_string(TaskKind k);

// In-order streams of one rank, as on a GPU. comm.grad carries the data-parallel gradient
// all-reduces (RunSpec::grad_sync), on a communicator of their own as in DDP / ZeRO.
// comm.pipeline carries the point-to-point transfers between pipeline stages; unlike the others
// it is not in order: each transfer is ordered by its dependencies alone, as NCCL runs the
// send/recv pairs of different peers on communicators (and streams) of their own.
enum class StreamClass {
  kCompute = 0,
  kCommDispatch = 1,
  kCommCombine = 2,
  kCopyD2H = 3,
  kCopyH2D = 4,
  kCommGrad = 5,
  kCommPipeline = 6
};
inline constexpr int kNumStreamClasses = 7;
std::string_view to_string(StreamClass s);
std::optional<StreamClass> parse_stream_class(std::string_view s);
inline bool is_comm_stream(StreamClass s) {
  return s == StreamClass::kCommDispatch || s == StreamClass::kCommCombine || s == StreamClass::kCommGrad ||
         s == StreamClass::kCommPipeline;
}
// Whether tasks on the stream run in the order they were added (every class but comm.pipeline).
inline bool is_ordered_stream(StreamClass s) { return s != StreamClass::kCommPipeline; }
inline bool is_copy_stream(StreamClass s) { return s == StreamClass::kCopyD2H || s == StreamClass::kCopyH2D; }

enum class Pass { kForward, kBackward };
std::string_view to_string(Pass p);  // "fwd" / "bwd"
std::optional<Pass> parse_pass(std::string_view s);

// Batched GEMM: `batch` independent (m x k) * (k x n) products (one per local expert).
struct GemmWork {
  std::int64_t batch = 1;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  DType dtype = DType::kFp32;  // math dtype; operands are stored in the model's dtype
  int element_bytes = 4;       // bytes per stored element
  GemmLayout layout = GemmLayout::kNN;
  // beta = 1: C is read and added to, as a weight gradient summed over chunks is; the read is as
  // many bytes again as C (bytes_moved), which a GEMM bound by C's traffic pays in full.
  bool accumulate = false;

  std::int64_t flops() const;           // 2 * batch * m * n * k
  std::int64_t bytes_moved() const;     // batch * (m*k + k*n + m*n (+ m*n read when accumulating)) * element_bytes
  std::int64_t c_bytes() const;         // batch * m * n * element_bytes: C once
};

// A memory-bound kernel (activation, softmax/top-k, encode, decode).
struct ElementwiseWork {
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;
  std::int64_t flops = 0;
};

enum class CollectiveOp { kAllToAll, kAllReduce, kAllGather, kReduceScatter };
std::string_view to_string(CollectiveOp op);
std::optional<CollectiveOp> parse_collective_op(std::string_view s);

// Rows each member of an all-to-allv sends to each member: rows[s * size + d] from group member s
// to member d (the diagonal stays local), row_bytes bytes each. Shared by the tasks that move the
// same rows (a chunk's dispatch, its combine as the transpose, their gradients).
struct TrafficMatrix {
  int size = 0;
  std::int64_t row_bytes = 0;
  // size x size; shared with the routing plan that made it (sim/routing/routing.h): an every-rank
  // simulation of thousands of ranks must not hold a second copy of N^2 counts per chunk.
  std::shared_ptr<const std::vector<std::int64_t>> rows;

  std::int64_t bytes(int s, int d) const;
};

// A collective over a rank group. For all-to-all, every member sends bytes_per_peer to every
// member (itself included: that part is a local copy) -- unless `traffic` is set: then it is an
// all-to-allv whose member s sends traffic->bytes(s, d) to member d (transposed: bytes(d, s), the
// reverse direction) and bytes_per_peer is unused. For all-reduce, all-gather and
// reduce-scatter, bytes_per_peer is the size of each rank's contribution (nccl-tests "size" / n
// for all-gather, the whole buffer for all-reduce is bytes_per_peer * group size).
struct CollectiveWork {
  CollectiveWork() = default;
  CollectiveWork(CollectiveOp op_, GroupId group_, std::int64_t bytes_per_peer_)
      : op(op_), group(group_), bytes_per_peer(bytes_per_peer_) {}

  CollectiveOp op = CollectiveOp::kAllToAll;
  GroupId group = 0;
  std::int64_t bytes_per_peer = 0;
  std::shared_ptr<const TrafficMatrix> traffic;
  bool transposed = false;

  // Bytes member s sends to member d (group positions), for either form.
  std::int64_t pair_bytes(int s, int d) const;
  bool is_all_to_allv() const { return traffic != nullptr; }
};

enum class CopyDirection { kDeviceToHost, kHostToDevice, kDeviceToDevice };
std::string_view to_string(CopyDirection d);
std::optional<CopyDirection> parse_copy_direction(std::string_view s);

struct CopyWork {
  std::int64_t bytes = 0;
  CopyDirection direction = CopyDirection::kDeviceToHost;
};

// Host-side work with a known duration (a synchronisation, a host callback).
struct HostWork {
  TimeNs duration_ns = 0;
};

using Work = std::variant<GemmWork, ElementwiseWork, CollectiveWork, CopyWork, HostWork>;

// The cost kind an op is priced as.
TaskKind kind_of(Op op);

// The op of `work`: `kernel` for a memory-bound kernel (it must be one of the elementwise ops),
// else the op the work determines (op.h). Throws InputError when `kernel` is not an
// elementwise op.
Op op_for(const Work& work, Op kernel = Op::kElementwise);

// Whether `op` is the op of `work`: its cost kind, and for work that determines its op, that op.
bool op_agrees(Op op, const Work& work);

// An operand binding: the bytes of one buffer a task reads or writes, in the element type they hold.
// A collective lists each simulated member's own buffers (the buffer names its rank). Bound so
// far: the MoE block's per-chunk expert tensors and their gradients (sim/build/memory_reuse.h)
// and its expert GEMMs' weights and weight gradients; other buffers, and the runtime's workspaces
// the graph does not hold, are not bound yet.
struct Operand {
  BufferId buffer = 0;
  std::int64_t offset = 0;  // bytes from the buffer's start
  std::int64_t bytes = 0;
  DType dtype = DType::kBf16;

  bool operator==(const Operand&) const = default;
};

struct Task {
  std::string id;          // stable, e.g. "L0.bwd.fc1.wgrad.c2"; unique per rank
  int rank = 0;            // the rank that runs it; for a collective, the group's issuing rank is
                           // irrelevant: the task runs on every simulated member (rank = -1)
  StreamClass stream = StreamClass::kCompute;
  Work work;
  // What it does (op.h); add_task sets op_for(work) when left empty and refuses an op that
  // disagrees with the work, so every task of a graph has one.
  std::optional<Op> op;
  int layer = 0;
  Pass pass = Pass::kForward;
  std::string stage;       // "gate", "dispatch", "fc1", ... (the stage column of reports)
  int chunk = -1;          // -1 for tasks of the whole layer
  std::vector<BufferId> allocates;  // allocated when the task starts
  std::vector<BufferId> frees;      // released when the task ends
  // What it reads and writes (in place: in both), in the order the block that binds them documents
  // (the runtime reads them by position: a bound GEMM, one of the MoE block's expert GEMMs, reads A,
  // then B, then C when it accumulates, and writes C). A rank with no rows in a chunk (imbalanced
  // routing) binds no activation of it, so its list is shorter; the runtime runs balanced routing.
  std::vector<Operand> reads;
  std::vector<Operand> writes;

  TaskKind kind() const;
  bool is_collective() const { return std::holds_alternative<CollectiveWork>(work); }
};

}  // namespace moesim
