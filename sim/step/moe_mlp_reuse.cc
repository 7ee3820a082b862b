// MPipeMoE's memory reuse in the whole step's MoE layers (--strategy s1-s4, MoeDims::strategy):
// the experts' dispatched rows T_DI and hidden columns T_M are not kept from a microbatch's
// forward to its backward (sim/memory/activations.h leaves them out of the layer's kept bytes);
// each chunk's are brought back just before its expert backward, as MPipeMoE's Table II restores
// them in a single layer (sim/build/memory_reuse.h):
//   s1  T_DI and T_M offloaded to the host in the forward, prefetched in the backward;
//   s2  T_DI re-dispatched (the forward's all-to-all again), T_M offloaded and prefetched;
//   s3  T_DI offloaded and prefetched, T_M recomputed (fc1 and the activation again);
//   s4  T_DI re-dispatched, T_M recomputed.
// The restored tensors are buffers from their restoring task to the end of the chunk's expert
// backward (its last task: fc1's weight gradient, which reads T_DI). A split backward (zb-h1,
// dualpipe) restores twice, each time what the pass reads (restore_needs): T_M's fc1-output
// columns (and T_DI where T_M is recomputed from it) for the chunk's input gradients (B; freed by
// fc1's input gradient), and every chunk's T_DI and activation output again, named `.w`, for the
// layer's weight gradients (W: the experts' over every chunk's rows at once). Simplified: the W
// restore starts when the W pass reaches the layer (no look-ahead). The offloads share the rank's
// device-to-host copy stream with the dispatcher's split-size copies, so a later MoE layer's
// dispatch waits behind the offloads queued before it. Simplified: no slot reuse (MPipeMoE's next
// chunk waits for the copy that empties its slot); the forward's own transient T_DI and T_M, and
// the host's pinned copies, are not counted; an imbalanced routing restores the most loaded
// rank's rows where the kept bytes it replaces are the balanced layout's. Where each rank routes
// its own shard (tp > 1 with sequence parallelism, or etp != tp), T_DI and T_M are the rows the
// experts all-gathered over etp: offloaded and prefetched or recomputed as they are, and a
// re-dispatch all-gathers them again after its all-to-all.
#include <string>

#include "sim/core/error.h"
#include "sim/step/moe_mlp.h"

namespace moesim {
std::int64_t MoeMlp::t_di_bytes(int c) const {
  const int ep = static_cast<int>(e_.shape().expert_group(0).size());
  return d_.local_rows(ep, c) * d_.hidden * e_.shape().element_bytes;
}

std::int64_t MoeMlp::t_m_bytes(int c, std::int64_t cols) const {
  const int ep = static_cast<int>(e_.shape().expert_group(0).size());
  return d_.local_rows(ep, c) * (cols > 0 ? cols : d_.expert_kept_cols) * e_.shape().element_bytes;
}

void MoeMlp::offload(const Chain& chain, int layer, int c, TaskIndex fc1) {
  std::pair<std::optional<TaskIndex>, std::optional<TaskIndex>> copies;
  if (offloads_t_di(d_.strategy)) {
    Chain after_fc1{chain.stage, chain.microbatch, fc1};
    copies.first = e_.copy(after_fc1, name(layer, Pass::kForward, "experts.offload.T_DI" + suffix(c), "offload"),
                           CopyWork{t_di_bytes(c), CopyDirection::kDeviceToHost});
  }
  if (offloads_t_m(d_.strategy)) {
    Chain after_fc2 = chain;
    copies.second = e_.copy(after_fc2, name(layer, Pass::kForward, "experts.offload.T_M" + suffix(c), "offload"),
                            CopyWork{t_m_bytes(c), CopyDirection::kDeviceToHost});
  }
  offloaded_[{chain.stage, chain.microbatch, layer, c}] = copies;
}

MoeMlp::RestoreNeeds MoeMlp::restore_needs(BackwardPart part) const {
  const std::int64_t act_cols = d_.expert_ffn;
  const std::int64_t all_cols = d_.expert_kept_cols;
  switch (part) {
    case BackwardPart::kAll:
      return {true, all_cols};
    case BackwardPart::kInput:
      // The activation's backward reads fc1's output (the activation's own output for ReLU); T_DI
      // only where T_M is recomputed from it.
      return {!offloads_t_m(d_.strategy), all_cols == act_cols ? act_cols : all_cols - act_cols};
    case BackwardPart::kWeight:
      return {true, act_cols};  // fc1's weight gradient reads T_DI, fc2's the activation's output
  }
  return {true, all_cols};
}

MoeMlp::Restored MoeMlp::restore(Chain& chain, int layer, int c, std::optional<TaskIndex> start, BackwardPart part,
                                 const std::string& again) {
  const auto found = offloaded_.find({chain.stage, chain.microbatch, layer, c});
  if (found == offloaded_.end())
    throw InternalError("moe reuse: layer " + std::to_string(layer) + " microbatch " + std::to_string(chain.microbatch) +
                        " chunk " + std::to_string(c) + " restored before its forward ran");
  const RestoreNeeds needs = restore_needs(part);
  Restored r;
  const std::string tag = "mb" + std::to_string(chain.microbatch) + ".L" + std::to_string(layer) + ".restored.";
  auto held = [&](TaskIndex task, const std::string& tensor, std::int64_t bytes) {
    const BufferId b = e_.buffer(chain.stage, tag + tensor + again + suffix(c), bytes, MemoryCategory::kActivations);
    e_.graph().allocate_at(task, b);
    r.buffers.push_back(b);
  };
  const Chain from_start{chain.stage, chain.microbatch, start};
  std::optional<TaskIndex> di;
  if (needs.t_di) {
    di = restore_t_di(from_start, layer, c, found->second.first, again);
    held(*di, "T_DI", t_di_bytes(c));
    r.ready.push_back(*di);
  }
  const std::int64_t m_bytes = t_m_bytes(c, needs.t_m_cols);
  if (offloads_t_m(d_.strategy)) {
    // T_M prefetched (the columns this pass reads).
    Chain side = from_start;
    const TaskIndex m =
        e_.copy(side, name(layer, Pass::kBackward, "experts.prefetch.T_M" + again + suffix(c), "prefetch"),
                CopyWork{m_bytes, CopyDirection::kHostToDevice});
    e_.graph().add_dependency(*found->second.second, m);
    held(m, "T_M", m_bytes);
    r.ready.push_back(m);
  } else {
    // fc1 and the activation run again on the restored T_DI, as --recompute full re-runs them:
    // forward-pass tasks of the recompute stage, FP8's input cast included (the weights' fp8 copy
    // is the forward's cached one).
    const int ep = static_cast<int>(e_.shape().expert_group(0).size());
    const std::int64_t rows = d_.local_rows(ep, c);
    const std::string prefix = "recompute" + again + ".";
    const auto first = static_cast<TaskIndex>(e_.graph().num_tasks());
    fp8_input(chain, layer, "experts.fc1", d_.local_experts * d_.hidden * d_.expert_fc1_out, rows * d_.hidden, prefix,
              suffix(c));
    const TaskIndex fc1 =
        e_.grouped_gemm(chain, name(layer, Pass::kForward, prefix + "experts.fc1" + suffix(c), "recompute"),
                        e_.gemm(d_.local_experts, d_.rows_per_local_expert(ep, c), d_.expert_fc1_out, d_.hidden));
    e_.graph().add_dependency(*di, first);
    held(fc1, "T_M", m_bytes);
    e_.kernel(chain, name(layer, Pass::kForward, prefix + "experts.act" + suffix(c), "recompute", Op::kActivation),
              e_.elementwise(rows * d_.expert_fc1_out, rows * d_.expert_ffn));
  }
  return r;
}

TaskIndex MoeMlp::restore_t_di(const Chain& from_start, int layer, int c, std::optional<TaskIndex> offload,
                               const std::string& again) {
  Chain side = from_start;
  if (offloads_t_di(d_.strategy)) {
    const TaskIndex di = e_.copy(side, name(layer, Pass::kBackward, "experts.prefetch.T_DI" + again + suffix(c), "prefetch"),
                                 CopyWork{t_di_bytes(c), CopyDirection::kHostToDevice});
    e_.graph().add_dependency(*offload, di);
    return di;
  }
  // Sent again by the ranks that dispatched it: the forward's path again, the all-to-all (a local
  // copy of the permuted rows where the expert-parallel group has one rank), the experts'
  // all-gather over etp where each rank routed its own shard, and the sort of the received rows
  // into expert order.
  const std::optional<TaskIndex> sent = all_to_all(from_start, layer, Pass::kBackward, "redispatch" + again, true, "", c);
  if (sent && sent != from_start.last) {
    side.last = sent;
  } else {
    const std::int64_t elems = d_.rows_sent(c) * d_.hidden;
    e_.kernel(side, name(layer, Pass::kBackward, "experts.redispatch" + again + suffix(c), "redispatch", Op::kEncode),
              e_.elementwise(elems, elems));
  }
  if (d_.own_shard && d_.gathered > 1) {
    const int ep = static_cast<int>(e_.shape().expert_group(side.stage).size());
    expert_tp_collective(side, layer, Pass::kBackward, "experts.tp.redispatch.allgather" + again + suffix(c),
                         CollectiveOp::kAllGather, d_.local_rows(ep, c), "");
  }
  dispatcher_.sort_chunks(side, layer, Pass::kBackward, "redispatch" + again, false, "", gathered_rows_of(c));
  return *side.last;
}

void MoeMlp::release(const Restored& r, TaskIndex first) {
  // The last task emitted: fc1's weight gradient (a side task), or in a split backward's B pass
  // fc1's input gradient.
  const auto last = static_cast<TaskIndex>(e_.graph().num_tasks() - 1);
  for (TaskIndex t : r.ready)
    if (t != first) e_.graph().add_dependency(t, first);
  for (BufferId b : r.buffers) e_.graph().free_at(last, b);
}

}  // namespace moesim
