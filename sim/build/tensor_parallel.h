// Tensor parallelism (DeepSpeed-TED, run.tp_size = t > 1; reference section 5) as a decorator of
// a block's all-to-alls. The t ranks of a tensor-parallel group hold the same B tokens (the
// non-expert blocks are Megatron tensor parallel) and each holds a 1/t slice of every local expert:
// FC1 column-parallel (fc1_out/t outputs), FC2 row-parallel (H/t inputs), so FC2's output is a
// partial sum that a tensor-parallel all-reduce completes before the combine (fwd.fc2.allreduce),
// as the input gradient of FC1 before the gradients' dispatch (bwd.fc1.allreduce). With duplicate
// token dropping each rank sends only its 1/t share of a chunk's capacity slots and an all-gather
// after the all-to-all restores the whole tensor (*.allgather). Each collective runs on the stream
// of the all-to-all it serves, in place over that all-to-all's tensor (per member: the chunk's
// dispatch tensor E*C/n x M, divided by t). Shared experts are tensor parallel as a Megatron MLP:
// an all-reduce of their partial output (forward) and input gradient (backward), B x M.
//
// Per rank the expert GEMMs and T_M, dM, dA, host.T_M, the shared experts' tensors and the expert
// parameters are then 1/t wide; T_DI, T_DO, T_O and their gradients stay whole. The tasks a chunk
// gains: forward fc2.allreduce right before combine and, with dropping, dispatch.allgather after
// dispatch (T_DI whole before FC1) and combine.allgather after combine (T_O whole before decode);
// backward combine.allgather after the gradients' combine (dDO whole), fc1.allreduce before their
// dispatch, dispatch.allgather after it, and redispatch.allgather after a re-dispatch (s2/s4: the
// re-dispatch writes the slot, its all-gather completes T_DI for FC1's recompute and W1 gradient).
#pragma once

#include <string>

#include "sim/build/emitter.h"

namespace moesim {

class TensorParallel {
 public:
  explicit TensorParallel(Emitter& emitter) : e_(emitter) {}

  bool active() const { return e_.dims().tp_size > 1; }
  bool drops_duplicate_tokens() const { return e_.dims().drop_duplicate_tokens; }

  // With duplicate token dropping, the all-gather `rest` after the all-to-all `a2a` of chunk c,
  // which completes its tensor (`uses`: the buffer it allocates when the all-to-all did not);
  // returns the task after which the tensor is whole: that all-gather, else `a2a` itself.
  Node gather_after(const Node& a2a, int layer, Pass pass, const std::string& rest, int chunk, StreamClass stream,
                    const Uses& uses = {});
  // With tensor parallelism, the all-reduce `rest` of chunk c's partial sums (its dispatch tensor),
  // emitted before the all-to-all that sends them; an empty Node without.
  Node reduce_partial_sums(int layer, Pass pass, const std::string& rest, int chunk, StreamClass stream);
  // The all-reduce of a partial B x M tensor of the whole layer (the shared experts'); `partial`
  // becomes it.
  void reduce_tokens(int layer, Pass pass, const std::string& rest, StreamClass stream, Node& partial);

 private:
  Emitter& e_;
};

}  // namespace moesim
