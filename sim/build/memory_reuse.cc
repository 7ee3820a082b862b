#include "sim/build/memory_reuse.h"

#include <algorithm>
#include <string>

#include "sim/build/expert_work.h"

namespace moesim {

MemoryReuse::MemoryReuse(Emitter& emitter, const RunSpec& run)
    : e_(emitter), strategy_(run.strategy), slots_(run.slots), layers_(static_cast<std::size_t>(run.num_moe_layers)) {}

namespace {

// Sizes per rank: R = the rows it received (E*C under uniform routing), or a slot's: its largest
// chunk.
Emitter::SizeOf received_bytes(const Emitter& e, std::int64_t cols) {
  return [&e, cols](const RankLoad& load) { return e.bytes(load.received_total, cols); };
}
Emitter::SizeOf slot_bytes(const Emitter& e, std::int64_t cols) {
  return [&e, cols](const RankLoad& load) { return e.bytes(load.received_max, cols); };
}

}  // namespace

void MemoryReuse::add_host_copies(int l) {
  const std::int64_t M = e_.dims().d_model, F = e_.dims().fc1_out_shard();
  if (offloads_di()) e_.buffer_each(l, "host.T_DI", -1, received_bytes(e_, M), MemoryCategory::kHostPinned, true);
  if (offloads_m()) e_.buffer_each(l, "host.T_M", -1, received_bytes(e_, F), MemoryCategory::kHostPinned, true);
}

void MemoryReuse::forward_tensors(int l, const Buf& stashed_di, std::vector<Buf>& saved) {
  const int n = e_.dims().num_chunks;
  const std::int64_t M = e_.dims().d_model, F = e_.dims().fc1_out_shard();
  LayerTensors& t = at(l);
  t.offload_di.assign(static_cast<std::size_t>(n), Node{});
  t.offload_m.assign(static_cast<std::size_t>(n), Node{});
  if (reuses()) {
    t.di = e_.slot_pool(l, "T_DI", std::min(slots_, 2 * n), slots_, slot_bytes(e_, M), MemoryCategory::kActivations);
    t.m = e_.slot_pool(l, "T_M", 1, 1, slot_bytes(e_, F), MemoryCategory::kActivations);
    t.dout = e_.slot_pool(l, "T_DO", std::min(slots_, n), slots_, slot_bytes(e_, M), MemoryCategory::kActivations);
    for (const SlotPool* pool : {&t.di, &t.m, &t.dout})
      saved.insert(saved.end(), pool->buffers().begin(), pool->buffers().end());
    return;
  }
  t.t_di = stashed_di;
  if (t.t_di.empty()) {
    t.t_di = e_.buffer_each(l, "T_DI", -1, received_bytes(e_, M), MemoryCategory::kActivations);
    saved.push_back(t.t_di);
  }
  t.t_m = e_.buffer_each(l, "T_M", -1, received_bytes(e_, F), MemoryCategory::kActivations);
  t.t_do = e_.buffer_each(l, "T_DO", -1, received_bytes(e_, M), MemoryCategory::kActivations);
  saved.push_back(t.t_m);
  saved.push_back(t.t_do);
}

Buf MemoryReuse::dispatch_allocates(int l, std::size_t g, bool first_issued) const {
  return reuses() ? at(l).di.allocated_by(g) : (first_issued ? at(l).t_di : Buf{});
}

Buf MemoryReuse::fc1_allocates(int l, std::size_t g) const {
  return reuses() ? at(l).m.allocated_by(g) : (g == 0 ? at(l).t_m : Buf{});
}

Buf MemoryReuse::fc2_allocates(int l, std::size_t g) const {
  return reuses() ? at(l).dout.allocated_by(g) : (g == 0 ? at(l).t_do : Buf{});
}

Node MemoryReuse::copy_after(int l, int c, const std::string& tensor, std::int64_t cols, CopyDirection direction,
                             const Buf& slot, const Node& after_a, const Node& after_b) {
  const bool offload = direction == CopyDirection::kDeviceToHost;
  // Offloading strategies exclude checkpointing's re-run: an offload is in the forward.
  const Node copy = e_.copy(l, offload ? Pass::kForward : Pass::kBackward,
                            (offload ? "offload." : "prefetch.") + tensor, offload ? "offload" : "prefetch", c, cols,
                            direction, Uses{{slot}, {}});
  e_.edge(after_a, copy);
  e_.edge(after_b, copy);
  return copy;
}

void MemoryReuse::offload(int l, int c, std::size_t g, const ForwardChunk& tasks) {
  LayerTensors& t = at(l);
  const auto chunk = static_cast<std::size_t>(c);
  Node di_release = tasks.fc1, m_release = tasks.fc2;
  if (offloads_di()) {
    di_release = copy_after(l, c, "T_DI", e_.dims().d_model, CopyDirection::kDeviceToHost, Buf{},
                            tasks.dispatch_done, tasks.fc1);
    t.offload_di[chunk] = di_release;
    bind(l, Tensor::kTDI, c, g, di_release, TaskGraph::Access::kRead);
  }
  if (offloads_m()) {
    m_release = copy_after(l, c, "T_M", e_.dims().fc1_out_shard(), CopyDirection::kDeviceToHost, Buf{}, tasks.act,
                           tasks.fc2);
    t.offload_m[chunk] = m_release;
    bind(l, Tensor::kTM, c, g, m_release, TaskGraph::Access::kRead);
  }
  t.di.released_by(g, di_release);
  t.m.released_by(g, m_release);
}

void MemoryReuse::forward_reuse_edges(int l, const std::vector<int>& chunks, const std::vector<Node>& dispatch,
                                      const std::vector<Node>& fc1, const std::vector<Node>& fc2,
                                      const std::vector<Node>& combine) {
  if (!reuses()) return;
  LayerTensors& t = at(l);
  for (std::size_t g = 0; g < chunks.size(); ++g) t.dout.released_by(g, combine[static_cast<std::size_t>(chunks[g])]);
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    const auto c = static_cast<std::size_t>(chunks[g]);
    e_.edge(t.di.release_before(g), dispatch[c], DepKind::kReuse);
    e_.edge(t.dout.release_before(g), fc2[c], DepKind::kReuse);
    e_.edge(t.m.release_before(g), fc1[c], DepKind::kReuse);
  }
}

std::vector<Buf> MemoryReuse::Gradients::pool() const {
  std::vector<Buf> all = d_do_slots.buffers();
  all.insert(all.end(), d_m_slot.buffers().begin(), d_m_slot.buffers().end());
  all.insert(all.end(), d_di_slots.buffers().begin(), d_di_slots.buffers().end());
  return all;
}

MemoryReuse::Gradients MemoryReuse::gradient_tensors(int l) {
  const std::int64_t M = e_.dims().d_model, F = e_.dims().fc1_out_shard();
  Gradients grads;
  if (!reuses()) {
    grads.d_do = e_.buffer_each(l, "dDO", -1, received_bytes(e_, M), MemoryCategory::kTemporary);
    grads.d_m = e_.buffer_each(l, "dM", -1, received_bytes(e_, F), MemoryCategory::kTemporary);
    grads.d_di = e_.buffer_each(l, "dDI", -1, received_bytes(e_, M), MemoryCategory::kTemporary);
    return grads;
  }
  // Made slot by slot, dDO and dDI interleaved (their buffer ids are in that order).
  std::vector<Buf> d_do, d_di;
  for (int i = 0; i < std::min(slots_, e_.dims().num_chunks); ++i) {
    const std::string slot = ".slot" + std::to_string(i);
    d_do.push_back(e_.buffer_each(l, "dDO" + slot, -1, slot_bytes(e_, M), MemoryCategory::kTemporary));
    d_di.push_back(e_.buffer_each(l, "dDI" + slot, -1, slot_bytes(e_, M), MemoryCategory::kTemporary));
  }
  grads.d_do_slots = SlotPool(std::move(d_do), slots_);
  grads.d_di_slots = SlotPool(std::move(d_di), slots_);
  grads.d_m_slot = SlotPool({e_.buffer_each(l, "dM.slot0", -1, slot_bytes(e_, F), MemoryCategory::kTemporary)}, 1);
  return grads;
}

void MemoryReuse::redispatch(int l, int c, std::size_t g, StreamClass stream, const Node& decode, TensorParallel& tp,
                             Restore& r) {
  if (!redispatches()) return;
  const Pass p = Pass::kBackward;
  const std::size_t q = static_cast<std::size_t>(e_.dims().num_chunks) + g;
  r.redispatch = e_.all_to_all(l, p, "redispatch", "redispatch", c, stream, true, Uses{{at(l).di.allocated_by(q)}, {}});
  e_.edge(decode, r.redispatch);
  r.di = tp.gather_after(r.redispatch, l, p, "redispatch.allgather", c, stream);
  r.di_writer = r.redispatch;
  bind(l, Tensor::kTDI, c, q, r.redispatch, TaskGraph::Access::kWrite);
  if (r.di != r.redispatch) {  // the all-gather completes the tensor in place
    bind(l, Tensor::kTDI, c, q, r.di, TaskGraph::Access::kRead);
    bind(l, Tensor::kTDI, c, q, r.di, TaskGraph::Access::kWrite);
  }
}

void MemoryReuse::restore(int l, int c, std::size_t g, const Node& decode, Restore& r) {
  const Pass p = Pass::kBackward;
  const std::int64_t M = e_.dims().d_model, F = e_.dims().fc1_out_shard();
  const LayerTensors& t = at(l);
  const std::size_t q = static_cast<std::size_t>(e_.dims().num_chunks) + g;
  const auto chunk = static_cast<std::size_t>(c);
  // Prefetches wait for the layer's backward to begin and for their chunk's offload.
  if (offloads_m()) {
    r.m = copy_after(l, c, "T_M", F, CopyDirection::kHostToDevice, t.m.allocated_by(q), decode, t.offload_m[chunk]);
    r.m_writer = r.m;
    bind(l, Tensor::kTM, c, q, r.m, TaskGraph::Access::kWrite);
  }
  if (offloads_di()) {
    r.di = copy_after(l, c, "T_DI", M, CopyDirection::kHostToDevice, t.di.allocated_by(q), decode,
                      t.offload_di[chunk]);
    r.di_writer = r.di;
    bind(l, Tensor::kTDI, c, q, r.di, TaskGraph::Access::kWrite);
  }
  if (recomputes()) {
    const Node fc1 = e_.compute_each(l, p, "recompute.fc1", "recompute", c, expert_fc1_work(e_, c),
                                     Uses{{t.m.allocated_by(q)}, {}});
    e_.edge(r.di, fc1);
    r.m_writer = fc1;
    r.recompute_fc1 = fc1;
    r.m = e_.compute_each(l, p, "recompute.act", "recompute", c, expert_activation_work(e_, c), {}, Op::kActivation);
    e_.edge(fc1, r.m);
    bind(l, Tensor::kTDI, c, q, fc1, TaskGraph::Access::kRead);
    bind(l, Tensor::kTM, c, q, fc1, TaskGraph::Access::kWrite);
    bind(l, Tensor::kTM, c, q, r.m, TaskGraph::Access::kRead);  // the activation, in place
    bind(l, Tensor::kTM, c, q, r.m, TaskGraph::Access::kWrite);
  }
}

void MemoryReuse::restore_edges(const Restore& r, const Node& act, const Node& fc2_wgrad, const Node& fc1_wgrad) {
  if (!reuses()) return;
  e_.edge(r.m, act);
  e_.edge(r.m, fc2_wgrad);
  e_.edge(r.di, fc1_wgrad);
}

void MemoryReuse::backward_reuse_edges(int l, const std::vector<int>& chunks, const std::vector<Restore>& restores,
                                       Gradients& grads, const BackwardChunks& tasks) {
  if (!reuses()) return;
  LayerTensors& t = at(l);
  const auto n = static_cast<std::size_t>(e_.dims().num_chunks);
  // The restores continue the forward's sequence (position n + g): the first ones wait for the
  // releases of the last forward chunks (an offload still in flight keeps its slot).
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    const auto c = static_cast<std::size_t>(chunks[g]);
    t.m.released_by(n + g, tasks.fc2_wgrad[c]);
    t.di.released_by(n + g, tasks.fc1_wgrad[c]);
    grads.d_do_slots.released_by(g, tasks.fc2_wgrad[c]);
    grads.d_m_slot.released_by(g, tasks.fc1_dgrad[c]);
    grads.d_di_slots.released_by(g, tasks.grad_dispatch[c]);
  }
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    const auto c = static_cast<std::size_t>(chunks[g]);
    e_.edge(t.m.release_before(n + g), restores[c].m_writer, DepKind::kReuse);
    e_.edge(t.di.release_before(n + g), restores[c].di_writer, DepKind::kReuse);
    e_.edge(grads.d_do_slots.release_before(g), tasks.grad_combine[c], DepKind::kReuse);
    e_.edge(grads.d_di_slots.release_before(g), tasks.fc1_dgrad[c], DepKind::kReuse);
    e_.edge(grads.d_m_slot.release_before(g), tasks.fc2_dgrad[c], DepKind::kReuse);
  }
}

void MemoryReuse::bind(int l, Tensor tensor, int c, std::size_t q, const Node& task, TaskGraph::Access access) {
  const LayerTensors& t = at(l);
  const std::int64_t cols = tensor == Tensor::kTM ? e_.dims().fc1_out_shard() : e_.dims().d_model;
  const Buf& full = tensor == Tensor::kTDI ? t.t_di : tensor == Tensor::kTM ? t.t_m : t.t_do;
  const SlotPool& pool = tensor == Tensor::kTDI ? t.di : tensor == Tensor::kTM ? t.m : t.dout;
  e_.bind(task, access, reuses() ? pool.slot_of(q) : full, e_.chunk_rows(c, cols, reuses()));
}

void MemoryReuse::bind(const Gradients& grads, Gradient tensor, int c, std::size_t g, const Node& task,
                       TaskGraph::Access access) {
  const std::int64_t cols = tensor == Gradient::kDM ? e_.dims().fc1_out_shard() : e_.dims().d_model;
  const Buf& full = tensor == Gradient::kDDO ? grads.d_do : tensor == Gradient::kDM ? grads.d_m : grads.d_di;
  const SlotPool& pool =
      tensor == Gradient::kDDO ? grads.d_do_slots : tensor == Gradient::kDM ? grads.d_m_slot : grads.d_di_slots;
  e_.bind(task, access, reuses() ? pool.slot_of(g) : full, e_.chunk_rows(c, cols, reuses()));
}

}  // namespace moesim
