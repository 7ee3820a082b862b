// The MPipeMoE memory-reuse strategies (run.strategy, MPipeMoE Table II) as a policy over the MoE
// block: which buffers hold a layer's per-chunk tensors, which task allocates and frees them, the
// tasks that restore what reuse overwrote and the reuse edges.
//
// Strategy none: T_DI, T_M, T_DO (R x M, R x F, R x M; R = the rows a rank receives) are
// full-size, allocated by the first chunk's writer and kept for backward; so are the chunk
// gradients dDO, dM, dDI (allocated by the first chunk's task, freed by the last's).
//
// s1-s4: slot pools (slot_pool.h) instead, MPipeMoE's preallocated buffers: T_DI.slot{s}
// (s < min(slots, 2n)), T_M.slot0 (one slot), T_DO.slot{s} (s < min(slots, n)), each R/n rows;
// the chunk gradients in dDO.slot{s}, dDI.slot{s} (s < min(slots, n)) and dM.slot0, allocated by
// bwd.decode and freed by bwd.gate.wgrad (a pool, so the peak does not depend on timing). Backward
// restores T_M, then T_DI, into the forward's slots (backward position g continues the sequence
// at n + g; a slot the forward never wrote, n < slots, is allocated by its first restore):
//   s1  offload T_DI and T_M (D2H copies on copy.d2h, stage offload), prefetch both (H2D, prefetch);
//   s2  offload / prefetch T_M; re-dispatch T_DI (an all-to-all right after the chunk's gradient
//       all-to-all, stage redispatch);
//   s3  offload / prefetch T_DI; recompute T_M (FC1 + activation, stage recompute);
//   s4  re-dispatch T_DI and recompute T_M.
// An offload copy is ordered after the compute task that last reads its buffer (T_DI after FC1,
// T_M after FC2) and is then the slot's releaser; prefetches wait for bwd.decode and their chunk's
// offload. The pinned host copies host.T_DI (s1/s3) and host.T_M (s1/s2) are resident.
//
// Reuse edges (DepKind::kReuse), by position g in the pass's processing order, s = run.slots:
//   fwd.dispatch.c{g} <- the last reader of T_DI of g-s (fwd.fc1, or fwd.offload.T_DI);
//   fwd.fc1.c{g} <- the last reader of T_M of g-1 (fwd.fc2, or fwd.offload.T_M);
//   fwd.fc2.c{g} <- fwd.combine.c{g-s} (sends T_DO of g-s);
//   T_M restore of g <- bwd.fc2.wgrad of g-1; T_DI restore of g <- bwd.fc1.wgrad of g-s (the first
//     ones: the last forward chunks' releases);
//   bwd.combine.c{g} <- bwd.fc2.wgrad of g-s (dDO); bwd.fc2.dgrad.c{g} <- bwd.fc1.dgrad of g-1
//     (dM); bwd.fc1.dgrad.c{g} <- bwd.dispatch of g-s (dDI).
// At most s T_DI, s T_DO and one T_M chunk occupy the slots at once: the activation maximum is
// T_I + T_O + the slots, MPipeMoE's Eq. 5.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/build/emitter.h"
#include "sim/build/ordering.h"
#include "sim/build/tensor_parallel.h"
#include "sim/spec/run_spec.h"

namespace moesim {

class MemoryReuse {
 public:
  MemoryReuse(Emitter& emitter, const RunSpec& run);

  bool reuses() const { return strategy_ != MemoryStrategy::kNone; }

  // ---- Forward.
  // The resident pinned host copies of the offloaded tensors.
  void add_host_copies(int layer);
  // The layer's T_DI, T_M and T_DO: pools or full-size tensors, appended to `saved`. A cac re-run
  // passes its stashed T_DI (`stashed_di`), which is then not made again.
  void forward_tensors(int layer, const Buf& stashed_di, std::vector<Buf>& saved);
  Buf t_di(int layer) const { return at(layer).t_di; }
  // What the writers of the chunk at position g allocate: the slot they write first, or the
  // full-size tensor for the first chunk (the first dispatch issued, for T_DI).
  Buf dispatch_allocates(int layer, std::size_t g, bool first_issued) const;
  Buf fc1_allocates(int layer, std::size_t g) const;
  Buf fc2_allocates(int layer, std::size_t g) const;
  // After chunk c's expert tasks (position g): its offload copies, ordered after the slot's last
  // compute reader; they then release the slot.
  struct ForwardChunk {
    Node dispatch_done, fc1, act, fc2;
  };
  void offload(int layer, int chunk, std::size_t g, const ForwardChunk& tasks);
  // Per chunk (indexed by chunk): the forward's reuse edges.
  void forward_reuse_edges(int layer, const std::vector<int>& chunks, const std::vector<Node>& dispatch,
                           const std::vector<Node>& fc1, const std::vector<Node>& fc2,
                           const std::vector<Node>& combine);

  // ---- Backward.
  // The chunk gradients dDO, dM, dDI (see the header); pool() is what bwd.decode allocates and
  // bwd.gate.wgrad frees.
  struct Gradients {
    Buf d_do, d_m, d_di;  // full-size, strategy none
    SlotPool d_do_slots, d_m_slot, d_di_slots;
    std::vector<Buf> pool() const;
  };
  Gradients gradient_tensors(int layer);
  // How chunk c's T_M and T_DI come back, and which task first writes each of their slots.
  struct Restore {
    Node m, di, m_writer, di_writer;
    Node redispatch;     // s2/s4: the re-dispatch all-to-all
    Node recompute_fc1;  // s3/s4: FC1's recomputation (its weight is bound by the block)
  };
  // s2/s4, in the issue order of the backward's collectives right after chunk c's gradient
  // all-to-all (position g): its re-dispatch, and with duplicate token dropping its all-gather.
  void redispatch(int layer, int chunk, std::size_t g, StreamClass stream, const Node& decode, TensorParallel& tp,
                  Restore& r);
  // Before chunk c's expert backward: prefetch T_M, then T_DI, and recompute T_M (s3/s4).
  void restore(int layer, int chunk, std::size_t g, const Node& decode, Restore& r);
  // The restored tensors' readers: the activation backward and the W2 gradient read T_M, the W1
  // gradient T_DI.
  void restore_edges(const Restore& r, const Node& act, const Node& fc2_wgrad, const Node& fc1_wgrad);
  // Per chunk (indexed by chunk) tasks of the expert backward, for its reuse edges.
  struct BackwardChunks {
    std::vector<Node> grad_combine, grad_dispatch, fc2_dgrad, fc1_dgrad, fc2_wgrad, fc1_wgrad;
  };
  void backward_reuse_edges(int layer, const std::vector<int>& chunks, const std::vector<Restore>& restores,
                            Gradients& grads, const BackwardChunks& tasks);

  // ---- Operand bindings (task.h): `task` reads or writes the bytes chunk c of a tensor occupies,
  // at sequence position q for the expert tensors (its slot q % slots, or its rows of the
  // full-size tensor under strategy none) and at backward position g for the chunk gradients.
  enum class Tensor { kTDI, kTM, kTDO };
  enum class Gradient { kDDO, kDM, kDDI };
  void bind(int layer, Tensor tensor, int chunk, std::size_t q, const Node& task, TaskGraph::Access access);
  void bind(const Gradients& grads, Gradient tensor, int chunk, std::size_t g, const Node& task,
            TaskGraph::Access access);

 private:
  bool offloads_di() const { return offloads_t_di(strategy_); }
  bool offloads_m() const { return offloads_t_m(strategy_); }
  bool redispatches() const { return strategy_ == MemoryStrategy::kS2 || strategy_ == MemoryStrategy::kS4; }
  bool recomputes() const { return strategy_ == MemoryStrategy::kS3 || strategy_ == MemoryStrategy::kS4; }

  // An offload (D2H) or prefetch (H2D, allocating `slot`) of chunk c's `tensor`, `cols` wide,
  // after the two tasks it must follow.
  Node copy_after(int layer, int chunk, const std::string& tensor, std::int64_t cols, CopyDirection direction,
                  const Buf& slot, const Node& after_a, const Node& after_b);

  struct LayerTensors {
    Buf t_di, t_m, t_do;             // full-size (strategy none)
    SlotPool di, m, dout;            // s1-s4
    std::vector<Node> offload_di, offload_m;  // per chunk
  };
  LayerTensors& at(int layer) { return layers_[static_cast<std::size_t>(layer)]; }
  const LayerTensors& at(int layer) const { return layers_[static_cast<std::size_t>(layer)]; }

  Emitter& e_;
  MemoryStrategy strategy_;
  int slots_;
  std::vector<LayerTensors> layers_;
};

}  // namespace moesim
