// Shared experts (DeepSeek-style, model.shared_experts): a dense MLP every token passes through
// beside the routed experts, on the compute stream. Forward: shared.fc1 -> shared.act ->
// shared.fc2, whose output decode adds to the routed one; backward, right after decode (they run
// while the first all-to-all of the routed gradients is in flight): shared.fc2.dgrad -> shared.act
// -> shared.fc2.wgrad, shared.fc1.wgrad -> shared.fc1.dgrad, whose input gradient gate.dgrad adds
// into dT_I.
//
// Buffers: shared.T_M (B x Fs, FC1's output, saved for backward with the layer's activations);
// temporaries shared.out (B x M, shared.fc2 -> fwd.decode), and in backward shared.dM (B x Fs,
// shared.fc2.dgrad -> shared.fc1.dgrad), shared.dA (B x Hs, swiglu only: shared.fc2.dgrad ->
// bwd.shared.act) and shared.dX (B x M, shared.fc1.dgrad -> bwd.gate.dgrad). Fs = Hs, or 2 Hs for
// swiglu; Hs = count x d_ffn / t, a tensor-parallel rank's slice.
//
// Tensor parallel (tensor_parallel.h), their output and input gradient are partial sums that an
// all-reduce (shared.allreduce) completes on the ordering's side stream: before the layer's
// all-to-alls are issued, or after them on a single communication channel.
#pragma once

#include <vector>

#include "sim/build/emitter.h"
#include "sim/build/ordering.h"
#include "sim/build/tensor_parallel.h"
#include "sim/spec/model_spec.h"

namespace moesim {

class SharedExperts {
 public:
  SharedExperts(Emitter& emitter, const ModelSpec& model, const Ordering& ordering, TensorParallel& tp);

  bool present() const { return h_ > 0; }
  std::int64_t hidden() const { return h_; }        // Hs on this rank (0: none)
  std::int64_t fc1_out() const { return fc1_out_; }  // Fs on this rank

  struct Forward {
    Node out;     // the task after which their output is whole
    Buf out_buf;  // shared.out, freed by decode
  };
  // Emits their forward after `input`; appends shared.T_M to `saved`. Nothing without them.
  Forward forward(int layer, Pass pass, const Node& input, std::vector<Buf>& saved);

  struct Backward {
    Node dgrad;                // the task after which their input gradient is whole
    Buf dx;                    // shared.dX, freed by gate.dgrad
    std::vector<Node> wgrads;  // for the gradient all-reduce
  };
  // Emits their backward after the layer's `decode`; shared.fc2.wgrad is the last reader of the
  // layer's incoming gradient `upstream_grad`, and frees it.
  Backward backward(int layer, const Node& decode, const Buf& upstream_grad);

  // The tensor-parallel all-reduce of `partial`, where the ordering puts it relative to the
  // layer's all-to-alls: call both, before and after emitting them.
  void reduce_before_all_to_alls(int layer, Pass pass, Node& partial);
  void reduce_after_all_to_alls(int layer, Pass pass, Node& partial);

 private:
  bool reduced() const { return present() && tp_.active(); }

  Emitter& e_;
  const Ordering& ordering_;
  TensorParallel& tp_;
  std::int64_t h_ = 0;        // Hs, this rank's slice
  std::int64_t fc1_out_ = 0;  // Fs
};

}  // namespace moesim
