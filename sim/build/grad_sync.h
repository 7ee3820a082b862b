// Gradient synchronisation (run.grad_sync) and ZeRO-1 (run.zero_stage) as a policy after a
// layer's backward: the data-parallel gradient all-reduces on stream comm.grad (stage grad_sync),
// in place over the layer's gradients, none over a group of one:
//   grad.experts.allreduce  over the expert data-parallel group (the ranks holding the same expert
//                           shards), once every fc1/fc2.wgrad of the layer is done;
//   grad.dense.allreduce    over the non-expert data-parallel group, after gate.wgrad and the
//                           shared experts' wgrads.
// With ZeRO-1 they stand for the reduce-scatter of the gradients and the all-gather of the updated
// parameters (the same ring traffic); what ZeRO-1 changes is the optimizer states' memory, which
// layer_model_state_bytes (memory_sizes.h) shards over the same groups.
#pragma once

#include <vector>

#include "sim/build/emitter.h"
#include "sim/build/memory_sizes.h"
#include "sim/spec/run_spec.h"

namespace moesim {

class GradientSync {
 public:
  GradientSync(Emitter& emitter, const RunSpec& run, const ModelStateBytes& layer_states)
      : e_(emitter), enabled_(run.grad_sync), states_(layer_states) {}

  // The weight-gradient tasks of one layer's backward that the all-reduces wait for.
  struct LayerGradients {
    std::vector<Node> expert_fc1, expert_fc2;  // per chunk
    Node gate;
    std::vector<Node> dense;                   // the shared experts'
  };
  void after_backward(int layer, const LayerGradients& grads);

 private:
  Emitter& e_;
  bool enabled_;
  ModelStateBytes states_;
};

}  // namespace moesim
