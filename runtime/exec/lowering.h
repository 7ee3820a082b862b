// Lowering: what one task of the MoE layer's graph does on one rank, as device calls.
//
// A task's op comes from its id (L<layer>.<pass>.<op>[.c<chunk>], layer_executor.h); each op of
// each pass has one handler, found in a table: lowering_forward.cc and lowering_backward.cc hold
// the local ops of the two passes, lowering.cc the tensors they address and the all-to-alls. An
// op without a handler is refused with InputError naming the task.
//
// A chunk's expert tensors (T_DI, T_M, T_DO) and gradients (dDO, dM or dA, dDI) are the task's
// operand bindings (task.h), by position in the order the MoE block binds them
// (sim/build/moe_layer_forward.cc, moe_layer_backward.cc), and so are the expert GEMMs' weights
// and weight gradients: fc1 (and its recomputation) reads T_DI, then W1, and writes T_M; the
// activation reads T_M; fc2 reads T_M (the runtime's activation output stands in), then W2, and
// writes T_DO; fc2.dgrad reads dDO, then W2, and writes dA (dM); the activation's backward reads
// dA (dM), then T_M, and writes dM; fc2.wgrad reads T_M, then dDO, and writes W2's gradient;
// fc1.wgrad T_DI, then dM, and writes W1's gradient (both, after the first chunk, also read it); fc1.dgrad reads dM, then W1, and writes dDI;
// copies and all-to-alls bind the one tensor they move. The gate's and the shared experts'
// weights, the routing state and the workspaces are found by name. Internal to runtime/exec.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/exec/executor_state.h"

namespace moesim::runtime {

class Lowering {
 public:
  explicit Lowering(const LayerExecutor::Shared& sh);

  // Issues local task t of layer view s on `stream`.
  void local(const RankLayer& s, const Task& t, const std::string& op, int stream) const;
  // The all-to-all of a collective task, for every local member.
  void collective(const std::vector<RankLayer>& members, const Task& t, const std::string& op,
                  const std::vector<int>& streams, Transport& transport) const;

 private:
  // One local task being lowered: its rank layer, chunk, stream and the layer's parameter (and,
  // in backward, gradient) pointers.
  struct Op {
    const RankLayer& s;
    const Task& t;
    int c;
    int stream;
    ParamPtrs p;
    ParamPtrs g;   // backward only
    // A weight gradient's GEMM adds to what the chunks before it wrote (all but the first chunk
    // in backward order): the task's GemmWork says so.
    bool accumulates() const { return std::get<GemmWork>(t.work).accumulate; }
  };
  using Handler = void (Lowering::*)(const Op&) const;
  using HandlerTable = std::map<std::string, Handler, std::less<>>;
  static const HandlerTable& forward_ops();   // lowering_forward.cc
  static const HandlerTable& backward_ops();  // lowering_backward.cc

  // Forward (lowering_forward.cc).
  void gate(const Op& o) const;
  void route(const Op& o) const;
  void encode(const Op& o) const;
  void fc1_forward(const Op& o) const;
  void act_forward(const Op& o) const;
  void fc2(const Op& o) const;
  void offload_t_di(const Op& o) const;
  void offload_t_m(const Op& o) const;
  void decode(const Op& o) const;
  void shared_fc1(const Op& o) const;
  void shared_act_forward(const Op& o) const;
  void shared_fc2(const Op& o) const;
  // Backward (lowering_backward.cc).
  void decode_backward(const Op& o) const;
  void prefetch_t_m(const Op& o) const;
  void prefetch_t_di(const Op& o) const;
  void recompute_fc1(const Op& o) const;
  void recompute_act(const Op& o) const;
  void fc2_dgrad(const Op& o) const;
  void act_backward(const Op& o) const;
  void fc2_wgrad(const Op& o) const;
  void fc1_wgrad(const Op& o) const;
  void fc1_dgrad(const Op& o) const;
  void encode_backward(const Op& o) const;
  void route_backward(const Op& o) const;
  void gate_dgrad(const Op& o) const;
  void gate_wgrad(const Op& o) const;
  void shared_fc2_dgrad(const Op& o) const;
  void shared_act_backward(const Op& o) const;
  void shared_fc2_wgrad(const Op& o) const;
  void shared_fc1_wgrad(const Op& o) const;
  void shared_fc1_dgrad(const Op& o) const;

  // The first byte of the task's i-th read (written: write) operand on the rank: of a collective,
  // which binds every simulated member's buffer, the i-th of the rank's own. InternalError when
  // the graph binds fewer.
  static char* read(const RankLayer& s, const Task& t, std::size_t i);
  static char* written(const RankLayer& s, const Task& t, std::size_t i);
  // The shared experts' dA (B x Hs): swiglu's own buffer, else shared.dM (computed over in place).
  char* shared_d_a(const RankLayer& s) const;
  // Chunk c of a source-side tensor in the chunk-major layout.
  char* source_chunk(char* base, int c) const { return base + c * rows_all_ * d_.d_model * eb_; }
  // op(A) m x k times op(B) k x n, per local expert.
  GemmArgs expert_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                       std::int64_t lda, std::int64_t sa, const void* b, std::int64_t ldb, std::int64_t sb, void* c,
                       std::int64_t ldc, std::int64_t sc, bool accumulate) const;
  // One GEMM (the gate's, the shared experts').
  GemmArgs dense_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                      std::int64_t lda, const void* b, std::int64_t ldb, void* c, std::int64_t ldc,
                      bool accumulate) const;
  void run_fc1(const Op& o) const;  // fc1 and its recomputation: T_M = T_DI W1
  void encode_rows(const RankLayer& s, std::int64_t begin, std::int64_t end, int stream) const;
  AllToAllMember all_to_all_member(const RankLayer& s, const Task& t, const std::string& op, int stream) const;
  [[noreturn]] static void unsupported(const Task& t);

  const LayerDims& d_;
  Storage type_;
  GemmMath math_;
  ActivationKind act_;
  bool normalize_;
  std::int64_t eb_, rows_, rows_all_, dispatch_rows_, shared_h_, shared_f_;
  BlockLayout source_, expert_;
};

}  // namespace moesim::runtime
