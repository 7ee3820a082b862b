// Op: what a task does, as a closed set (design.md section 3; issue 21 item 2). The cost kind
// (TaskKind) says how a task is priced; the op says which operation it is, so that a consumer of
// the graph (the GPU runtime, a report) dispatches on it instead of reading the task's id.
//
// Every op belongs to exactly one cost kind, and for all but the memory-bound kernels the op
// follows from the work: a GEMM is `gemm` with batch 1 and `batched_gemm` otherwise (the local
// experts', attention's heads); a collective's op is its CollectiveOp, an all-to-all with a
// traffic matrix being `all_to_allv` (or `send_recv`: point-to-point sends, which moesim prices as
// an all-to-allv of the sending pairs); a copy's is its direction. The memory-bound kernels
// (ElementwiseWork) say which kernel they are: the router's softmax and top-k, the dispatch's
// encode (permute), the combine's decode (unpermute and weighted sum), an activation, or any other
// elementwise kernel (norms, residual adds, dropout, attention's softmax, optimizer updates,
// FP8 casts), which the cost models do not tell apart.
#pragma once

#include <optional>
#include <string_view>
#include <string>
#include <vector>


namespace moesim {

enum class Op {
  kGemm,
  kBatchedGemm,
  kTopK,
  kEncode,
  kDecode,
  kActivation,
  kElementwise,
  kAllToAll,
  kAllToAllV,
  kSendRecv,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kCopyD2H,
  kCopyH2D,
  kCopyD2D,
  kHost
};

std::string_view to_string(Op op);  // "gemm", "batched_gemm", "top_k", "all_to_allv", "copy_h2d", ...
std::optional<Op> parse_op(std::string_view s);
std::vector<std::string> op_names();  // every op's name, in the enum's order

// kind_of, op_for and op_agrees, which relate an op to a task's work, are in task.h.

}  // namespace moesim
