// The MoE block's backward (moe_layer_block.h).
#include "sim/build/moe_layer_block.h"
#include "sim/core/checked_math.h"

namespace moesim {

struct MoeLayerBlock::BackwardPass {
  int l = 0;
  Buf d_t_o, d_t_i;
  MemoryReuse::Gradients grads;
  std::vector<Buf> d_a;  // per chunk, swiglu only: dA from fc2.dgrad to act
  Node decode;
  SharedExperts::Backward shared;
  CommOrder order;
  std::vector<MemoryReuse::Restore> restores;  // per chunk
  MemoryReuse::BackwardChunks tasks;           // per chunk
  // Per chunk, with tensor parallelism (as in forward): the tasks after which dDO and the
  // token-side gradient are whole, and the all-reduce of FC1's partial input gradient.
  std::vector<Node> grad_combine_done, grad_dispatch_done, dgrad_reduce;
};

namespace {

// An expert weight gradient, X^T dY (tn), summed over the chunks in C: each chunk after the first
// in backward order adds to what the earlier ones wrote (beta = 1), as the runtime's executor does.
GemmWork weight_gradient(const Emitter& e, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                         bool accumulate) {
  GemmWork w = e.gemm(batch, m, k, n, GemmLayout::kTN);
  w.accumulate = accumulate;
  return w;
}

// The gate's input gradient, dlogits W_gate^T (nt), added to the input gradient that the
// encode's backward already holds (beta = 1).
GemmWork gate_input_gradient(const Emitter& e, std::int64_t tokens, std::int64_t experts, std::int64_t d_model) {
  GemmWork w = e.gemm(1, tokens, experts, d_model, GemmLayout::kNT);
  w.accumulate = true;
  return w;
}

}  // namespace

Block::Gradient MoeLayerBlock::backward(int l, const Gradient& upstream) {
  // Activation checkpointing: the layer's forward runs again first, from its input (and the
  // stash), re-creating the tensors its backward reads.
  const Node rerun_decode = policies_.checkpointing.rerun(
      l, [&](const Buf& out) { return forward(l, Node{}, t_i_[static_cast<std::size_t>(l)], out); });
  BackwardPass b = begin_backward(l);
  emit_backward_decode(b, upstream, rerun_decode);
  // The shared experts run right after decode, on the compute stream, while the first all-to-all
  // of the routed gradients is in flight.
  b.shared = policies_.shared_experts.backward(l, b.decode, upstream.buffer);
  policies_.shared_experts.reduce_before_all_to_alls(l, Pass::kBackward, b.shared.dgrad);
  emit_backward_all_to_alls(b);
  policies_.shared_experts.reduce_after_all_to_alls(l, Pass::kBackward, b.shared.dgrad);
  emit_expert_backward(b);
  policies_.memory.backward_reuse_edges(l, b.order.compute_chunks, b.restores, b.grads, b.tasks);
  return emit_router_backward(b);
}

// The gradients (temporary): dT_O (the layer's incoming gradient in expert order) and dT_I (the
// gradient of its input, B x M), the chunk gradients (memory_reuse.h) and swiglu's dA.
MoeLayerBlock::BackwardPass MoeLayerBlock::begin_backward(int l) {
  BackwardPass b;
  b.l = l;
  const std::int64_t M = e_.dims().d_model, H = e_.dims().d_ffn_shard(), F = e_.dims().fc1_out_shard();
  const int n = e_.dims().num_chunks;
  b.d_t_o = e_.buffer_each(
      l, "dT_O", -1, [&](const RankLoad& load) { return e_.bytes(load.sent_total, M); }, MemoryCategory::kTemporary);
  b.d_t_i = e_.buffer(l, "dT_I", -1, e_.bytes(e_.dims().tokens, M), MemoryCategory::kTemporary);
  b.grads = policies_.memory.gradient_tensors(l);
  b.d_a.assign(static_cast<std::size_t>(n), Buf{});
  if (F != H)
    for (int c = 0; c < n; ++c)
      b.d_a[static_cast<std::size_t>(c)] = e_.buffer_each(
          l, "bwd.dA", c, [&, c](const RankLoad& load) { return e_.bytes(load.received_in(c), H); },
          MemoryCategory::kTemporary);
  return b;
}

// Decode's backward allocates dT_O and the gradient pool; it is the last reader of the incoming
// gradient unless the shared experts read it after.
void MoeLayerBlock::emit_backward_decode(BackwardPass& b, const Gradient& upstream, const Node& rerun_decode) {
  const std::int64_t B = e_.dims().tokens, M = e_.dims().d_model, k = e_.dims().top_k;
  const std::int64_t bk = checked_mul(B, k);
  std::vector<Buf> alloc = b.grads.pool();
  alloc.push_back(b.d_t_o);
  const Buf freed = policies_.shared_experts.present() ? Buf{} : upstream.buffer;
  b.decode = e_.compute_each(
      b.l, Pass::kBackward, "decode", "decode", -1,
      [&](const RankLoad& load) {
        const std::int64_t sent = checked_mul(load.sent_total, M);
        return Work{e_.elementwise(checked_mul(B, M) + sent + bk, sent + bk, checked_mul({4, B, k, M}))};
      },
      Uses{alloc, {freed}}, Op::kDecode);
  e_.edge(upstream.task, b.decode);
  e_.edge(rerun_decode, b.decode);
}

// The gradients' all-to-alls in the ordering's issue order: the combine of dT_O's chunk (its
// re-dispatch follows it with s2/s4), and the dispatch back of dDI after FC1's all-reduce.
void MoeLayerBlock::emit_backward_all_to_alls(BackwardPass& b) {
  const int l = b.l;
  const Pass p = Pass::kBackward;
  const auto size = static_cast<std::size_t>(e_.dims().num_chunks);
  MemoryReuse::BackwardChunks& t = b.tasks;
  for (auto* v : {&t.grad_combine, &t.grad_dispatch, &t.fc2_dgrad, &t.fc1_dgrad, &t.fc2_wgrad, &t.fc1_wgrad,
                  &b.grad_combine_done, &b.grad_dispatch_done, &b.dgrad_reduce})
    v->assign(size, Node{});
  b.restores.assign(size, MemoryReuse::Restore{});
  b.order = policies_.ordering.pass_order(p);
  const std::vector<std::size_t> pos = b.order.positions();
  const auto [first_g, last_g] = b.order.first_last(false);
  const int last_d = b.order.first_last(true).second;
  TensorParallel& tp = policies_.tensor_parallel;
  for (const auto& [second, c] : b.order.issue) {
    const auto i = static_cast<std::size_t>(c);
    const StreamClass stream = second ? b.order.second_stream : b.order.first_stream;
    if (!second) {
      const Buf ddo = c == first_g ? b.grads.d_do : Buf{};
      const Buf dto = c == last_g ? b.d_t_o : Buf{};
      t.grad_combine[i] = e_.all_to_all(l, p, "combine", "combine", c, stream, true, Uses{{ddo}, {dto}});
      b.grad_combine_done[i] = tp.gather_after(t.grad_combine[i], l, p, "combine.allgather", c, stream);
      policies_.memory.redispatch(l, c, pos[i], stream, b.decode, tp, b.restores[i]);
    } else {
      const Buf ddi = c == last_d ? b.grads.d_di : Buf{};
      b.dgrad_reduce[i] = tp.reduce_partial_sums(l, p, "fc1.allreduce", c, stream);
      t.grad_dispatch[i] = e_.all_to_all(l, p, "dispatch", "dispatch", c, stream, false, Uses{{}, {ddi}});
      e_.edge(b.dgrad_reduce[i], t.grad_dispatch[i]);
      b.grad_dispatch_done[i] = tp.gather_after(t.grad_dispatch[i], l, p, "dispatch.allgather", c, stream);
    }
  }
}

// Per chunk in processing order: the memory policy's restores, then fc2.dgrad -> act ->
// fc2.wgrad, fc1.wgrad -> fc1.dgrad. Without reuse the full-size chunk gradients are allocated by
// the first chunk's task and freed by the last's.
void MoeLayerBlock::emit_expert_backward(BackwardPass& b) {
  const int l = b.l;
  const Pass p = Pass::kBackward;
  const std::int64_t M = e_.dims().d_model, H = e_.dims().d_ffn_shard(), F = e_.dims().fc1_out_shard();
  const std::int64_t El = e_.dims().local_experts;
  MemoryReuse::BackwardChunks& t = b.tasks;
  const std::vector<int>& chunks = b.order.compute_chunks;
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    const int c = chunks[g];
    const auto i = static_cast<std::size_t>(c);
    const bool first = g == 0, last = g + 1 == chunks.size();
    policies_.memory.restore(l, c, g, b.decode, b.restores[i]);
    const auto rows = [&, c](const RankLoad& load) { return e_.expert_rows(load, c); };
    t.fc2_dgrad[i] = e_.compute_each(
        l, p, "fc2.dgrad", "fc2", c, [&](const RankLoad& load) { return Work{e_.gemm(El, rows(load), M, H, GemmLayout::kNT)}; },
        Uses{{first ? b.grads.d_m : Buf{}, b.d_a[i]}, {}});
    const Node act = e_.compute_each(
        l, p, "act", "act", c,
        [&](const RankLoad& load) {
          const std::int64_t r = load.received_in(c);
          return Work{e_.elementwise(checked_mul(r, H) + checked_mul(r, F), checked_mul(r, F), checked_mul(r, F))};
        },
        Uses{{}, {b.d_a[i]}}, Op::kActivation);
    t.fc2_wgrad[i] = e_.compute_each(
        l, p, "fc2.wgrad", "fc2", c, [&](const RankLoad& load) { return Work{weight_gradient(e_, El, H, rows(load), M, !first)}; },
        Uses{{}, {last ? b.grads.d_do : Buf{}}});
    t.fc1_wgrad[i] = e_.compute_each(l, p, "fc1.wgrad", "fc1", c,
                                     [&](const RankLoad& load) { return Work{weight_gradient(e_, El, M, rows(load), F, !first)}; });
    t.fc1_dgrad[i] = e_.compute_each(
        l, p, "fc1.dgrad", "fc1", c, [&](const RankLoad& load) { return Work{e_.gemm(El, rows(load), F, M, GemmLayout::kNT)}; },
        Uses{{first ? b.grads.d_di : Buf{}}, {last ? b.grads.d_m : Buf{}}});
    e_.edge(b.decode, t.grad_combine[i]);
    e_.edge(b.grad_combine_done[i], t.fc2_dgrad[i]);
    e_.edge(t.fc2_dgrad[i], act);
    e_.edge(b.grad_combine_done[i], t.fc2_wgrad[i]);
    e_.edge(act, t.fc1_wgrad[i]);
    e_.edge(act, t.fc1_dgrad[i]);
    e_.edge(t.fc1_dgrad[i], present_or(b.dgrad_reduce[i], t.grad_dispatch[i]));
    policies_.memory.restore_edges(b.restores[i], act, t.fc2_wgrad[i], t.fc1_wgrad[i]);
    bind_backward_chunk(b, c, g, act);
  }
}

// Operand bindings of chunk c's expert backward at position g (the restored T_DI and T_M at
// sequence position n + g): the gradient's all-to-all writes dDO, FC2's data gradient reads it and
// W2 and writes dM (swiglu: its own dA), a recomputed FC1 reads W1 after T_DI, the activation's
// backward reads dA, then T_M, and writes dM in place, the weight gradients read T_M then dDO, T_DI
// then dM, write their gradient in grads (and, after the first chunk, read it: they add to it),
// FC1's data gradient reads dM and W1 and writes dDI, which a tensor-parallel all-reduce sums in place and the dispatch back sends.
// The order of the calls is each task's operand order, which the runtime reads by position
// (runtime/exec/lowering.h).
void MoeLayerBlock::bind_backward_chunk(const BackwardPass& b, int c, std::size_t g, const Node& act) {
  using T = MemoryReuse::Tensor;
  using G = MemoryReuse::Gradient;
  constexpr auto kRead = TaskGraph::Access::kRead, kWrite = TaskGraph::Access::kWrite;
  MemoryReuse& m = policies_.memory;
  const MemoryReuse::BackwardChunks& t = b.tasks;
  const auto i = static_cast<std::size_t>(c);
  const int l = b.l;
  const std::size_t q = static_cast<std::size_t>(e_.dims().num_chunks) + g;
  m.bind(b.grads, G::kDDO, c, g, t.grad_combine[i], kWrite);
  if (b.grad_combine_done[i] != t.grad_combine[i]) {
    m.bind(b.grads, G::kDDO, c, g, b.grad_combine_done[i], kRead);
    m.bind(b.grads, G::kDDO, c, g, b.grad_combine_done[i], kWrite);
  }
  m.bind(b.grads, G::kDDO, c, g, t.fc2_dgrad[i], kRead);
  bind_weight(l, Weight::kW2, false, t.fc2_dgrad[i], kRead);
  bind_weight(l, Weight::kW1, false, b.restores[i].recompute_fc1, kRead);
  const Emitter::RangeOf d_a = e_.chunk_rows(c, e_.dims().d_ffn_shard(), true);
  if (b.d_a[i].empty()) {
    m.bind(b.grads, G::kDM, c, g, t.fc2_dgrad[i], kWrite);
    m.bind(b.grads, G::kDM, c, g, act, kRead);
  } else {
    e_.bind(t.fc2_dgrad[i], kWrite, b.d_a[i], d_a);
    e_.bind(act, kRead, b.d_a[i], d_a);
  }
  m.bind(l, T::kTM, c, q, act, kRead);
  m.bind(b.grads, G::kDM, c, g, act, kWrite);
  m.bind(l, T::kTM, c, q, t.fc2_wgrad[i], kRead);
  m.bind(b.grads, G::kDDO, c, g, t.fc2_wgrad[i], kRead);
  bind_weight(l, Weight::kW2, true, t.fc2_wgrad[i], kWrite);
  m.bind(l, T::kTDI, c, q, t.fc1_wgrad[i], kRead);
  m.bind(b.grads, G::kDM, c, g, t.fc1_wgrad[i], kRead);
  bind_weight(l, Weight::kW1, true, t.fc1_wgrad[i], kWrite);
  if (g > 0) {  // the chunks after the first add to the weight gradients (accumulate): C is read too
    bind_weight(l, Weight::kW2, true, t.fc2_wgrad[i], kRead);
    bind_weight(l, Weight::kW1, true, t.fc1_wgrad[i], kRead);
  }
  m.bind(b.grads, G::kDM, c, g, t.fc1_dgrad[i], kRead);
  bind_weight(l, Weight::kW1, false, t.fc1_dgrad[i], kRead);
  m.bind(b.grads, G::kDDI, c, g, t.fc1_dgrad[i], kWrite);
  m.bind(b.grads, G::kDDI, c, g, b.dgrad_reduce[i], kRead);
  m.bind(b.grads, G::kDDI, c, g, b.dgrad_reduce[i], kWrite);
  m.bind(b.grads, G::kDDI, c, g, t.grad_dispatch[i], kRead);
}

// Encode's backward, the router's gradient and the layer's last task, gate.wgrad, which releases
// the saved activations and the gradient pool (and layer 0's dT_I, the step's input gradient);
// then the gradient all-reduces.
Block::Gradient MoeLayerBlock::emit_router_backward(BackwardPass& b) {
  const int l = b.l;
  const Pass p = Pass::kBackward;
  const std::int64_t B = e_.dims().tokens, M = e_.dims().d_model, E = e_.dims().num_experts;
  const std::int64_t bk = checked_mul(B, e_.dims().top_k), be = checked_mul(B, E);
  const Node encode = e_.compute_each(
      l, p, "encode", "encode", -1,
      [&](const RankLoad& load) {
        const std::int64_t sent = checked_mul(load.sent_total, M);
        return Work{e_.elementwise(sent, checked_mul(B, M), sent)};
      },
      Uses{{b.d_t_i}, {}}, Op::kEncode);
  for (const Node& done : b.grad_dispatch_done) e_.edge(done, encode);
  const Node route =
      e_.compute(l, p, "route", "route", -1, e_.elementwise(be + bk, be, checked_mul(4, be)), {}, Op::kTopK);
  e_.edge(b.decode, route);
  const Node gate_d = e_.compute(l, p, "gate.dgrad", "gate", -1, gate_input_gradient(e_, B, E, M), Uses{{}, {b.shared.dx}});
  e_.edge(route, gate_d);
  e_.edge(encode, gate_d);
  e_.edge(b.shared.dgrad, gate_d);
  std::vector<Buf> release = saved_[static_cast<std::size_t>(l)];
  if (l == 0) release.push_back(b.d_t_i);
  const std::vector<Buf> pool = b.grads.pool();
  release.insert(release.end(), pool.begin(), pool.end());
  const Node gate_w = e_.compute(l, p, "gate.wgrad", "gate", -1, e_.gemm(1, E, B, M, GemmLayout::kTN), Uses{{}, release});
  e_.edge(route, gate_w);
  policies_.grad_sync.after_backward(l, {b.tasks.fc1_wgrad, b.tasks.fc2_wgrad, gate_w, b.shared.wgrads});
  return Gradient{gate_d, b.d_t_i};
}

}  // namespace moesim
