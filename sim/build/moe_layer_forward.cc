// The MoE block's forward (moe_layer_block.h); also its re-run under activation checkpointing,
// emitted inside an Emitter::RerunScope (pass bwd, prefixed ids and buffers).
#include "sim/build/expert_work.h"
#include "sim/build/moe_layer_block.h"
#include "sim/core/checked_math.h"
#include "sim/core/error.h"

namespace moesim {

struct MoeLayerBlock::ForwardPass {
  int l = 0;
  Pass p = Pass::kForward;
  std::vector<Buf> saved;  // what this pass keeps for backward
  Buf t_o;
  bool t_o_made = false;  // T_O is this pass's (the first combine allocates it), not the stash
  Buf scores, topk;
  Node gate, route, encode;
  SharedExperts::Forward shared;
  CommOrder order;
  std::vector<std::size_t> pos;  // per chunk: its processing position
  // Per chunk: the all-to-alls, and with tensor parallelism the tasks after which a chunk's T_DI
  // and combined rows are whole (the all-gathers that follow the all-to-alls with duplicate token
  // dropping, else the all-to-alls) and the all-reduce of FC2's partial sums.
  std::vector<Node> dispatch, combine, dispatch_done, fc2_reduce, combine_done, fc1, fc2;
};

MoeLayerBlock::MoeLayerBlock(Emitter& emitter, const ModelSpec& model, const RunSpec& run,
                             const MoePolicies& policies)
    : e_(emitter),
      run_(run),
      policies_(policies),
      model_states_(layer_model_state_bytes(model, emitter.dims(), run.optimizer, run.zero_stage)),
      param_layout_(param_layout(emitter.dims(), policies.shared_experts.fc1_out(), policies.shared_experts.hidden())),
      params_(static_cast<std::size_t>(run.num_moe_layers)),
      grads_(static_cast<std::size_t>(run.num_moe_layers)),
      t_i_(static_cast<std::size_t>(run.num_moe_layers)),
      saved_(static_cast<std::size_t>(run.num_moe_layers)) {
  // The weights' layout and the closed-form parameter count are two views of one buffer.
  if (param_layout_.end != model_states_.param_bytes)
    throw InternalError("the weights' layout ends at byte " + std::to_string(param_layout_.end) +
                        " of a layer's params, which hold " + std::to_string(model_states_.param_bytes));
}

Node MoeLayerBlock::forward(int l, const Node& input, const Buf& in, const Buf& out) {
  ForwardPass f = begin_forward(l, in);
  emit_router(f, input, in);
  f.shared = policies_.shared_experts.forward(l, f.p, input, f.saved);
  policies_.shared_experts.reduce_before_all_to_alls(l, f.p, f.shared.out);
  emit_forward_all_to_alls(f);
  policies_.shared_experts.reduce_after_all_to_alls(l, f.p, f.shared.out);
  emit_experts(f);
  policies_.memory.forward_reuse_edges(l, f.order.compute_chunks, f.dispatch, f.fc1, f.fc2, f.combine);
  return emit_decode(f, in, out);
}

// The pass's buffers: the model states (resident, once), T_O, the stash, the routing data and the
// expert tensors.
MoeLayerBlock::ForwardPass MoeLayerBlock::begin_forward(int l, const Buf& in) {
  ForwardPass f;
  f.l = l;
  f.p = e_.rerunning() ? Pass::kBackward : Pass::kForward;
  const std::int64_t B = e_.dims().tokens, M = e_.dims().d_model, E = e_.dims().num_experts, k = e_.dims().top_k;
  Checkpointing& checkpointing = policies_.checkpointing;
  if (!e_.rerunning()) {
    const ModelStateBytes& ms = model_states_;
    params_[static_cast<std::size_t>(l)] = e_.buffer(l, "params", -1, ms.param_bytes, MemoryCategory::kModelStates, true);
    grads_[static_cast<std::size_t>(l)] = e_.buffer(l, "grads", -1, ms.grad_bytes, MemoryCategory::kModelStates, true);
    if (ms.optimizer_bytes > 0)  // plain SGD in fp32 keeps no optimizer state
      e_.buffer(l, "optimizer", -1, ms.optimizer_bytes, MemoryCategory::kModelStates, true);
    policies_.memory.add_host_copies(l);
    t_i_[static_cast<std::size_t>(l)] = in;
  }
  f.t_o = checkpointing.stashed_t_o(l);
  f.t_o_made = f.t_o.empty();
  if (f.t_o_made) {
    f.t_o = e_.buffer_each(
        l, "T_O", -1, [&](const RankLoad& load) { return e_.bytes(load.sent_total, M); }, MemoryCategory::kActivations);
    f.saved.push_back(f.t_o);
  }
  checkpointing.stash_t_o(l, f.t_o);
  if (run_.count_routing_data) {
    f.scores = e_.buffer(l, "scores", -1, e_.bytes(B, E), MemoryCategory::kActivations);
    f.topk = e_.buffer(l, "topk", -1, checked_mul({B, k, 8}), MemoryCategory::kActivations);
    f.saved.push_back(f.scores);
    f.saved.push_back(f.topk);
  }
  policies_.memory.forward_tensors(l, checkpointing.stashed_t_di(l), f.saved);
  checkpointing.stash_t_di(l, policies_.memory.t_di(l));
  return f;
}

// Gate GEMM, softmax/top-k and encode: the whole layer's tokens, before any chunk.
void MoeLayerBlock::emit_router(ForwardPass& f, const Node& input, const Buf& in) {
  const int l = f.l;
  const Pass p = f.p;
  const std::int64_t B = e_.dims().tokens, M = e_.dims().d_model, E = e_.dims().num_experts, k = e_.dims().top_k;
  // The first layer's gate allocates the step's input (block.h).
  f.gate = e_.compute(l, p, "gate", "gate", -1, e_.gemm(1, B, M, E),
                      Uses{{l == 0 && !e_.rerunning() ? in : Buf{}}, {}});
  e_.edge(input, f.gate);
  const std::int64_t be = checked_mul(B, E);
  f.route = e_.compute(l, p, "route", "route", -1, e_.elementwise(be, be + checked_mul({2, B, k}), checked_mul(4, be)),
                       Uses{{f.scores, f.topk}, {}}, Op::kTopK);
  e_.edge(f.gate, f.route);
  f.encode = e_.compute_each(
      l, p, "encode", "encode", -1,
      [&](const RankLoad& load) { return Work{e_.elementwise(checked_mul(B, M), checked_mul(load.sent_total, M), 0)}; },
      {}, Op::kEncode);
  e_.edge(f.route, f.encode);
}

// The all-to-alls in the ordering's issue order (each stream's order is what matters; data edges
// to the compute tasks are added once those exist). Tensor-parallel collectives go right after
// (the all-gathers) or before (the all-reduce) the all-to-all they serve, in place: the all-to-all
// writes a rank's share of the slot, the all-gather the rest. A cac re-run has no all-to-alls: its
// all-gathers (duplicate token dropping) read the stashed shares and allocate the tensors.
void MoeLayerBlock::emit_forward_all_to_alls(ForwardPass& f) {
  const int l = f.l, n = e_.dims().num_chunks;
  const Pass p = f.p;
  const auto size = static_cast<std::size_t>(n);
  for (auto* v : {&f.dispatch, &f.combine, &f.dispatch_done, &f.fc2_reduce, &f.combine_done, &f.fc1, &f.fc2})
    v->assign(size, Node{});
  f.order = policies_.ordering.pass_order(Pass::kForward);  // a re-run issues as the forward did
  f.pos = f.order.positions();
  const int first_dispatch = f.order.first_last(false).first;
  const int first_combine = f.order.first_last(true).first;
  const bool sends = !policies_.checkpointing.reads_stash();
  TensorParallel& tp = policies_.tensor_parallel;
  for (const auto& [second, c] : f.order.issue) {
    const auto i = static_cast<std::size_t>(c);
    const StreamClass stream = second ? f.order.second_stream : f.order.first_stream;
    if (!second) {
      Buf di = policies_.memory.dispatch_allocates(l, f.pos[i], c == first_dispatch);
      if (sends) {
        const Buf stash = policies_.checkpointing.dispatch_stash(l, c == first_dispatch);
        f.dispatch[i] = e_.all_to_all(l, p, "dispatch", "dispatch", c, stream, true, Uses{{di, stash}, {}});
        di = Buf{};
      }
      f.dispatch_done[i] = tp.gather_after(f.dispatch[i], l, p, "dispatch.allgather", c, stream, Uses{{di}, {}});
    } else {
      Buf out = c == first_combine && f.t_o_made ? f.t_o : Buf{};
      f.fc2_reduce[i] = tp.reduce_partial_sums(l, p, "fc2.allreduce", c, stream);
      if (sends) {
        const Buf stash = policies_.checkpointing.combine_stash(l, c == first_combine);
        f.combine[i] = e_.all_to_all(l, p, "combine", "combine", c, stream, false, Uses{{out, stash}, {}});
        out = Buf{};
        e_.edge(f.fc2_reduce[i], f.combine[i]);
      }
      f.combine_done[i] = tp.gather_after(f.combine[i], l, p, "combine.allgather", c, stream, Uses{{out}, {}});
    }
  }
}

// Per chunk in processing order: FC1 -> activation -> FC2, then the memory policy's offloads.
void MoeLayerBlock::emit_experts(ForwardPass& f) {
  const int l = f.l;
  const Pass p = f.p;
  const std::int64_t M = e_.dims().d_model, H = e_.dims().d_ffn_shard(), El = e_.dims().local_experts;
  const std::vector<int>& chunks = f.order.compute_chunks;
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    const int c = chunks[g];
    const auto i = static_cast<std::size_t>(c);
    const Node fc1 = e_.compute_each(l, p, "fc1", "fc1", c, expert_fc1_work(e_, c),
                                     Uses{{policies_.memory.fc1_allocates(l, g)}, {}});
    const Node act = e_.compute_each(l, p, "act", "act", c, expert_activation_work(e_, c), {}, Op::kActivation);
    f.fc2[i] = e_.compute_each(
        l, p, "fc2", "fc2", c,
        [&](const RankLoad& load) { return Work{e_.gemm(El, e_.expert_rows(load, c), H, M)}; },
        Uses{{policies_.memory.fc2_allocates(l, g)}, {}});
    f.fc1[i] = fc1;
    e_.edge(f.encode, f.dispatch[i]);
    // A re-run from the stash all-gathers (dropping) where the all-to-all would have run: after
    // encode, and after FC2 and its all-reduce.
    if (f.dispatch[i].empty()) e_.edge(f.encode, present_or(f.dispatch_done[i], fc1));
    if (f.combine[i].empty() && !f.combine_done[i].empty()) {
      e_.edge(f.fc2[i], f.combine_done[i]);
      e_.edge(f.fc2_reduce[i], f.combine_done[i]);
    }
    e_.edge(f.dispatch_done[i], fc1);
    e_.edge(fc1, act);
    e_.edge(act, f.fc2[i]);
    e_.edge(f.fc2[i], present_or(f.fc2_reduce[i], f.combine[i]));  // to the TP all-reduce, if any
    bind_forward_chunk(f, c, g, act);
    policies_.memory.offload(l, c, g, MemoryReuse::ForwardChunk{f.dispatch_done[i], fc1, act, f.fc2[i]});
  }
}

// Operand bindings of chunk c's expert tensors at position g: the all-to-all writes T_DI (and a
// tensor-parallel all-gather completes it in place), FC1 reads it and W1 and writes T_M, the
// activation rewrites T_M in place (its output counted in T_M's bytes), FC2 reads it and W2 and
// writes T_DO, which
// a tensor-parallel all-reduce sums in place and the combine sends. The order of the calls is
// each task's operand order, which the runtime reads by position (runtime/exec/lowering.h).
void MoeLayerBlock::bind_forward_chunk(const ForwardPass& f, int c, std::size_t g, const Node& act) {
  using T = MemoryReuse::Tensor;
  constexpr auto kRead = TaskGraph::Access::kRead, kWrite = TaskGraph::Access::kWrite;
  MemoryReuse& m = policies_.memory;
  const auto i = static_cast<std::size_t>(c);
  const int l = f.l;
  m.bind(l, T::kTDI, c, g, f.dispatch[i], kWrite);
  if (f.dispatch_done[i] != f.dispatch[i]) {
    m.bind(l, T::kTDI, c, g, f.dispatch_done[i], kRead);
    m.bind(l, T::kTDI, c, g, f.dispatch_done[i], kWrite);
  }
  m.bind(l, T::kTDI, c, g, f.fc1[i], kRead);
  bind_weight(l, Weight::kW1, false, f.fc1[i], kRead);
  m.bind(l, T::kTM, c, g, f.fc1[i], kWrite);
  m.bind(l, T::kTM, c, g, act, kRead);
  m.bind(l, T::kTM, c, g, act, kWrite);
  m.bind(l, T::kTM, c, g, f.fc2[i], kRead);
  bind_weight(l, Weight::kW2, false, f.fc2[i], kRead);
  m.bind(l, T::kTDO, c, g, f.fc2[i], kWrite);
  m.bind(l, T::kTDO, c, g, f.fc2_reduce[i], kRead);
  m.bind(l, T::kTDO, c, g, f.fc2_reduce[i], kWrite);
  m.bind(l, T::kTDO, c, g, f.combine[i], kRead);
}

// Decode reads the combined rows and the scores, plus the shared experts' output it adds, and
// writes the layer's output; what the pass saved is split by the checkpointing policy.
Node MoeLayerBlock::emit_decode(ForwardPass& f, const Buf& in, const Buf& out) {
  const int l = f.l;
  const std::int64_t B = e_.dims().tokens, M = e_.dims().d_model, k = e_.dims().top_k;
  std::vector<Buf> freed_at_decode = {f.shared.out_buf};
  policies_.checkpointing.split_saved(l, f.saved, in, out, saved_[static_cast<std::size_t>(l)], freed_at_decode);
  const std::int64_t shared_read = policies_.shared_experts.present() ? checked_mul(B, M) : 0;
  const Node decode = e_.compute_each(
      l, f.p, "decode", "decode", -1,
      [&](const RankLoad& load) {
        return Work{e_.elementwise(checked_mul(load.sent_total, M) + checked_mul(B, k) + shared_read,
                                   checked_mul(B, M), checked_mul({2, B, k, M}))};
      },
      Uses{{out}, freed_at_decode}, Op::kDecode);
  for (const Node& done : f.combine_done) e_.edge(done, decode);
  e_.edge(f.route, decode);
  e_.edge(f.shared.out, decode);
  return decode;
}

void MoeLayerBlock::bind_weight(int l, Weight w, bool gradient, const Node& task, TaskGraph::Access access) {
  const ParamLayout& at = param_layout_;
  const std::int64_t begin = w == Weight::kW1 ? at.w1 : at.w2;
  const std::int64_t end = w == Weight::kW1 ? at.w2 : at.shared_w1;
  const auto layer = static_cast<std::size_t>(l);
  e_.bind(task, access, gradient ? grads_[layer] : params_[layer],
          [begin, end](const RankLoad&) { return std::pair{begin, end - begin}; });
}

}  // namespace moesim
