#include "sim/build/grad_sync.h"

namespace moesim {

void GradientSync::after_backward(int l, const LayerGradients& grads) {
  if (!enabled_) return;
  const Pass p = Pass::kBackward;
  const ParallelLayout& layout = e_.groups().layout();
  if (layout.dp > 1) {
    const Node ar = e_.group_collective(l, p, "grad.experts.allreduce", "grad_sync", -1, StreamClass::kCommGrad,
                                        GroupKind::kExpertData, CollectiveOp::kAllReduce, states_.expert_grad_bytes());
    for (std::size_t c = 0; c < grads.expert_fc1.size(); ++c) {
      e_.edge(grads.expert_fc1[c], ar);
      e_.edge(grads.expert_fc2[c], ar);
    }
  }
  if (layout.ep * layout.dp > 1) {
    const Node ar = e_.group_collective(l, p, "grad.dense.allreduce", "grad_sync", -1, StreamClass::kCommGrad,
                                        GroupKind::kDenseData, CollectiveOp::kAllReduce, states_.dense_grad_bytes());
    e_.edge(grads.gate, ar);
    for (const Node& w : grads.dense) e_.edge(w, ar);
  }
}

}  // namespace moesim
