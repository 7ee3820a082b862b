#include "sim/step/moe_mlp.h"

#include <cmath>

#include "sim/core/error.h"
#include "sim/routing/routing.h"

namespace moesim {

MoeDims moe_dims(const ModelSpec& model, const StepShape& shape, int chunks, bool sequence_parallel) {
  MoeDims d;
  d.sequence_parallel = sequence_parallel;
  const int tp = shape.layout.tp;
  const int etp = shape.layout.expert_tp();
  d.own_shard = shape.layout.routes_own_shard(sequence_parallel);
  d.shared_tokens = shape.tokens();
  d.tokens = d.own_shard ? shape.tokens() / tp : shape.tokens();
  d.gathered = d.own_shard ? etp : 1;
  d.hidden = model.d_model;
  d.experts = model.num_experts;
  d.local_experts = model.num_experts / shape.layout.ep;
  d.top_k = model.top_k;
  // floor(k f N / E), with the relative slack sim/build/layer_dims.cc and sim/memory/activations.cc
  // give f's binary representation.
  const double raw = static_cast<double>(model.top_k) * static_cast<double>(d.tokens) * model.capacity_factor /
                     model.num_experts;
  d.capacity = static_cast<std::int64_t>(raw * (1.0 + 1e-12));
  const bool gated = model.activation == Activation::kSwiglu;
  d.expert_ffn = model.d_ffn / etp;
  d.expert_fc1_out = gated ? 2 * d.expert_ffn : d.expert_ffn;
  // The columns the backward reads (sim/memory/activations.cc's mlp_columns): fc1's output, which
  // ReLU's backward does not need, and the activation's.
  d.expert_kept_cols = (model.activation == Activation::kRelu ? 0 : d.expert_fc1_out) + d.expert_ffn;
  if (model.shared_experts.count > 0) {
    d.shared_ffn = static_cast<std::int64_t>(model.shared_experts.count) * model.shared_experts.d_ffn / tp;
    d.shared_fc1_out = gated ? 2 * d.shared_ffn : d.shared_ffn;
  }
  d.chunks = chunks;
  return d;
}

MoeDims step_moe_dims(const ModelSpec& model, const StepShape& shape, const StepSpec& spec) {
  MoeDims d = moe_dims(model, shape, spec.moe_chunks, spec.sequence_parallel);
  d.strategy = spec.moe_strategy;
  MoeRoutingShape routing;
  routing.ep = shape.layout.ep;
  routing.experts = d.experts;
  routing.top_k = d.top_k;
  routing.tokens = d.tokens;
  routing.capacity = d.capacity;
  routing.dropless = model.dropless;
  routing.chunks = d.chunks;
  routing.element_bytes = shape.element_bytes;
  routing.row_bytes = d.hidden * shape.element_bytes;
  if (std::optional<MoeRouting> plan = make_moe_routing(spec.routing, routing, spec.seed))
    d.routing = std::make_shared<const MoeRouting>(std::move(*plan));
  d.dispatcher = spec.dispatcher;
  d.router_groups = model.router_groups;
  return d;
}

void check_moe_chunks(const ModelSpec& model, const StepShape& shape, int chunks, bool sequence_parallel) {
  if (chunks < 1) throw InputError("--chunks " + std::to_string(chunks) + " must be at least 1");
  if (chunks == 1) return;
  if (!model.has_moe_layers())
    throw InputError("--chunks " + std::to_string(chunks) + " pipelines MoE layers; " + model.name + " has none");
  const MoeDims d = moe_dims(model, shape, chunks, sequence_parallel);
  if (chunks > d.capacity)
    throw InputError("--chunks " + std::to_string(chunks) + " is more than the " + std::to_string(d.capacity) +
                     " rows each expert receives from each rank of its expert-parallel group per microbatch "
                     "(floor(top-k x capacity factor x " + std::to_string(d.tokens) + " tokens / " +
                     std::to_string(d.experts) + " experts)): every chunk needs at least one row");
}

std::int64_t MoeDims::chunk_capacity(int c) const { return c == kWhole ? capacity : chunk_share(capacity, c, chunks); }

namespace {
// A routed rank's rows of chunk c, or of every chunk (kWhole).
std::int64_t routed_rows(const std::vector<std::int64_t>& per_chunk, int c) {
  if (c != MoeDims::kWhole) return per_chunk.at(static_cast<std::size_t>(c));
  std::int64_t total = 0;
  for (std::int64_t rows : per_chunk) total += rows;
  return total;
}
}  // namespace

std::int64_t MoeDims::rows_sent(int c) const {
  if (routing) return routed_rows(routing->sent, c);
  return static_cast<std::int64_t>(experts) * chunk_capacity(c);
}

std::int64_t MoeDims::rows_per_local_expert(int ep, int c) const {
  // Routed: as the MoE-layer simulation's grouped GEMMs (Emitter::expert_rows), rounded up.
  if (routing) return (local_rows(ep, c) + local_experts - 1) / local_experts;
  return static_cast<std::int64_t>(ep) * gathered * chunk_capacity(c);
}

std::int64_t MoeDims::local_rows(int ep, int c) const {
  if (routing) return routed_rows(routing->received, c) * gathered;
  return local_experts * rows_per_local_expert(ep, c);
}

std::optional<TaskIndex> MoeMlp::all_to_all(const Chain& chain, int layer, Pass pass, const std::string& what,
                                            bool to_experts, const std::string& prefix, int c) {
  Chain own = chain;
  const TaskName task = name(layer, pass, prefix + what + suffix(c), prefix.empty() ? "a2a" : "recompute");
  const StreamClass stream = to_experts ? StreamClass::kCommDispatch : StreamClass::kCommCombine;
  const std::vector<int> group = e_.shape().expert_group(chain.stage);
  if (d_.routing)  // the combine direction sends the rows back: the transpose
    return e_.all_to_allv(own, task, stream, group, d_.routing->rows_traffic.at(static_cast<std::size_t>(c)),
                          !to_experts);
  if (d_.dispatcher == TokenDispatcher::kDeepEp) return dedup_all_to_all(chain, task, stream, to_experts, c);
  return e_.group_collective(own, task, stream, CollectiveOp::kAllToAll, group,
                             d_.rows_sent(c) * d_.hidden * e_.shape().element_bytes);
}

std::optional<TaskIndex> MoeMlp::dedup_all_to_all(const Chain& chain, const TaskName& task, StreamClass stream,
                                                  bool to_experts, int c) {
  Chain own = chain;
  const std::vector<int> group = e_.shape().expert_group(chain.stage);
  std::shared_ptr<const TrafficMatrix>& traffic = dedup_traffic_[{chain.stage, c}];
  if (!traffic) traffic = dedup_traffic(group, c);
  return e_.all_to_allv(own, task, stream, group, traffic, !to_experts);
}

std::shared_ptr<const TrafficMatrix> MoeMlp::dedup_traffic(const std::vector<int>& group, int c) const {
  // Each member's node, and its position among the group's members on that node (DeepEP pairs
  // the members of one position across nodes; check_dispatcher made every node hold as many).
  const int gpn = e_.shape().gpus_per_node;
  const auto p = static_cast<int>(group.size());
  std::vector<int> node(group.size()), position(group.size());
  std::map<int, int> seen;  // node -> members placed so far
  for (int i = 0; i < p; ++i) {
    node[static_cast<std::size_t>(i)] = group[static_cast<std::size_t>(i)] / gpn;
    position[static_cast<std::size_t>(i)] = seen[node[static_cast<std::size_t>(i)]]++;
  }
  const auto nodes = static_cast<int>(seen.size());
  const DedupHits hits = dedup_hits(d_.experts, d_.top_k, e_.shape().layout.ep, nodes, d_.router_groups);
  // The rank's tokens of chunk c (it sends top-k rows per token when no row is padded or dropped).
  const double tokens = static_cast<double>(d_.rows_sent(c)) / d_.top_k;
  // Across nodes, the tokens that hit the peer's node; within the node, the tokens a GPU holds once
  // its position's peers have sent theirs (its own included) that hit the peer.
  const auto across = static_cast<std::int64_t>(std::llround(tokens * hits.node));
  const auto within = static_cast<std::int64_t>(std::llround(tokens * nodes * hits.gpu));
  auto rows = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(p) * static_cast<std::size_t>(p), 0);
  for (int s = 0; s < p; ++s)
    for (int d = 0; d < p; ++d) {
      const auto su = static_cast<std::size_t>(s), du = static_cast<std::size_t>(d);
      if (s == d) continue;
      if (node[su] == node[du]) (*rows)[su * static_cast<std::size_t>(p) + du] = within;
      else if (position[su] == position[du]) (*rows)[su * static_cast<std::size_t>(p) + du] = across;
    }
  auto t = std::make_shared<TrafficMatrix>();
  t->size = p;
  t->row_bytes = d_.hidden * e_.shape().element_bytes;
  t->rows = std::move(rows);
  return t;
}

std::vector<std::optional<TaskIndex>> MoeMlp::to_experts(const Chain& chain, int layer, Pass pass,
                                                         const std::string& what, const std::string& prefix,
                                                         std::optional<TaskIndex> host_wait) {
  std::vector<std::optional<TaskIndex>> out;
  for (int c = 0; c < d_.chunks; ++c) {
    Chain own = chain;
    own.last = all_to_all(chain, layer, pass, what, true, prefix, c);
    // The host issues the dispatch once it holds the split sizes (moe_dispatcher.h); the routing
    // probabilities follow the tokens.
    if (host_wait && own.last && own.last != chain.last) e_.graph().add_dependency(*host_wait, *own.last);
    if (pass == Pass::kForward) dispatcher_.probs_all_to_all(own, layer, pass, what, true, prefix, rows_of(c));
    out.push_back(own.last);
  }
  return out;
}

void MoeMlp::after_chunks(const Chain& chain, const std::vector<std::optional<TaskIndex>>& back) {
  for (std::size_t c = 0; c + 1 < back.size(); ++c)
    if (back[c] && back[c] != chain.last) e_.graph().add_dependency(*back[c], *chain.last);
}

void MoeMlp::expert_tp_collective(Chain& chain, int layer, Pass pass, const std::string& what, CollectiveOp op,
                                  std::int64_t rows, const std::string& prefix) {
  e_.group_collective(chain, name(layer, pass, prefix + what, prefix.empty() ? "tp" : "recompute"),
                      op == CollectiveOp::kAllGather ? StreamClass::kCommDispatch : StreamClass::kCommCombine, op,
                      e_.shape().expert_tensor_group(chain.stage), rows * d_.hidden * e_.shape().element_bytes);
}

void MoeMlp::shared_tp_collective(Chain& chain, int layer, Pass pass, const std::string& what, CollectiveOp op,
                                  const std::string& prefix) {
  e_.group_collective(chain, name(layer, pass, prefix + what, prefix.empty() ? "tp" : "recompute"),
                      StreamClass::kCommDispatch, op, e_.shape().tensor_group(chain.stage),
                      d_.shared_tokens * d_.hidden * e_.shape().element_bytes);
}

void MoeMlp::fp8_input(Chain& chain, int layer, const std::string& what, std::int64_t weight_elems,
                       std::int64_t input_elems, const std::string& prefix, const std::string& chunk) {
  if (!e_.fp8()) return;
  if (prefix.empty()) e_.fp8_weight_cast(chain, name(layer, Pass::kForward, what, "fp8"), weight_elems);
  Fp8Amax amax;
  if (d_.sequence_parallel && what == "shared.fc1") amax.reduce_over = e_.shape().tensor_group(chain.stage);
  e_.fp8_quantize(chain,
                  name(layer, Pass::kForward, prefix + what + ".fp8.input" + chunk, prefix.empty() ? "fp8" : "recompute"),
                  input_elems, amax);
}

void MoeMlp::fp8_grad(Chain& chain, int layer, const std::string& what, std::int64_t elems, const std::string& chunk) {
  if (!e_.fp8()) return;
  Fp8Amax amax;
  if (d_.sequence_parallel && what == "shared.fc2") amax.reduce_over = e_.shape().tensor_group(chain.stage);
  e_.fp8_quantize(chain, name(layer, Pass::kBackward, what + ".fp8.grad" + chunk, "fp8"), elems, amax);
}

void MoeMlp::shared_forward(Chain& chain, int layer, const std::string& prefix, bool gather) {
  if (d_.shared_ffn == 0) return;
  const std::string stage = prefix.empty() ? "shared" : "recompute";
  const std::int64_t tokens = d_.shared_tokens;
  if (gather) shared_tp_collective(chain, layer, Pass::kForward, "shared.tp.allgather", CollectiveOp::kAllGather, prefix);
  fp8_input(chain, layer, "shared.fc1", d_.hidden * d_.shared_fc1_out, tokens * d_.hidden, prefix);
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "shared.fc1", stage),
            e_.gemm(1, tokens, d_.shared_fc1_out, d_.hidden));
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "shared.act", stage, Op::kActivation),
            e_.elementwise(tokens * d_.shared_fc1_out, tokens * d_.shared_ffn));
  fp8_input(chain, layer, "shared.fc2", d_.shared_ffn * d_.hidden, tokens * d_.shared_ffn, prefix);
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "shared.fc2", stage),
            e_.gemm(1, tokens, d_.hidden, d_.shared_ffn));
  if (gather)
    shared_tp_collective(chain, layer, Pass::kForward, "shared.tp.reducescatter", CollectiveOp::kReduceScatter, prefix);
}

void MoeMlp::recompute_act(Chain& chain, int layer) {
  const std::int64_t rows = d_.local_rows(static_cast<int>(e_.shape().expert_group(chain.stage).size()));
  e_.kernel(chain, name(layer, Pass::kBackward, "recompute.experts.act", "recompute", Op::kActivation),
            e_.elementwise(rows * d_.expert_fc1_out, rows * d_.expert_ffn));
}

void MoeMlp::recompute_shared(Chain& chain, int layer) {
  const bool tensor_parallel = e_.shape().tensor_group(chain.stage).size() > 1;
  const bool gather = d_.own_shard || (d_.sequence_parallel && tensor_parallel);
  shared_forward(chain, layer, "recompute.", gather);
  if (!gather && tensor_parallel)
    shared_tp_collective(chain, layer, Pass::kForward, "shared.tp.allreduce", CollectiveOp::kAllReduce, "recompute.");
}

// Chunk c's local experts: fc1, the activation and fc2 as batched GEMMs over the rows it received.
TaskIndex MoeMlp::experts_forward(Chain& chain, int layer, const std::string& prefix, int c) {
  const std::string stage = prefix.empty() ? "experts" : "recompute";
  const std::string chunk = suffix(c);
  const int ep = static_cast<int>(e_.shape().expert_group(chain.stage).size());
  const std::int64_t per_expert = d_.rows_per_local_expert(ep, c);
  const std::int64_t local_rows = d_.local_rows(ep, c);
  fp8_input(chain, layer, "experts.fc1", d_.local_experts * d_.hidden * d_.expert_fc1_out, local_rows * d_.hidden,
            prefix, chunk);
  const TaskIndex fc1 = e_.grouped_gemm(chain, name(layer, Pass::kForward, prefix + "experts.fc1" + chunk, stage),
                                        e_.gemm(d_.local_experts, per_expert, d_.expert_fc1_out, d_.hidden));
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "experts.act" + chunk, stage, Op::kActivation),
            e_.elementwise(local_rows * d_.expert_fc1_out, local_rows * d_.expert_ffn));
  fp8_input(chain, layer, "experts.fc2", d_.local_experts * d_.expert_ffn * d_.hidden, local_rows * d_.expert_ffn,
            prefix, chunk);
  e_.grouped_gemm(chain, name(layer, Pass::kForward, prefix + "experts.fc2" + chunk, stage),
                  e_.gemm(d_.local_experts, per_expert, d_.hidden, d_.expert_ffn));
  return fc1;
}

void MoeMlp::forward(Chain& chain, int layer, const std::string& prefix) {
  const std::string stage = prefix.empty() ? "router" : "recompute";
  const std::int64_t rows = d_.rows_sent();
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "router", stage),
            e_.storage_gemm(1, d_.tokens, d_.experts, d_.hidden));
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "topk", stage, Op::kTopK),
            e_.elementwise(d_.tokens * d_.experts, d_.tokens * 2 * d_.top_k));
  const std::optional<TaskIndex> splits_on_host = dispatcher_.routing_metadata(chain, layer, prefix);
  e_.kernel(chain, name(layer, Pass::kForward, prefix + "permute", stage, Op::kEncode),
            e_.elementwise(d_.tokens * d_.hidden, rows * d_.hidden));
  Chain shared = chain;  // the shared experts need the block input only
  const std::vector<std::optional<TaskIndex>> dispatched =
      to_experts(chain, layer, Pass::kForward, "dispatch", prefix, splits_on_host);
  shared_forward(shared, layer, prefix, d_.own_shard);
  const int ep = static_cast<int>(e_.shape().expert_group(chain.stage).size());
  std::vector<std::optional<TaskIndex>> combined;
  for (int c = 0; c < d_.chunks; ++c) {
    chain.last = dispatched[static_cast<std::size_t>(c)];
    if (d_.own_shard)
      expert_tp_collective(chain, layer, Pass::kForward, "experts.tp.allgather" + suffix(c), CollectiveOp::kAllGather,
                           d_.local_rows(ep, c), prefix);
    dispatcher_.sort_chunks(chain, layer, Pass::kForward, "dispatch", true, prefix, gathered_rows_of(c));
    const TaskIndex fc1 = experts_forward(chain, layer, prefix, c);
    if (d_.strategy != MemoryStrategy::kNone && prefix.empty()) offload(chain, layer, c, fc1);
    dispatcher_.sort_chunks(chain, layer, Pass::kForward, "combine", false, prefix, gathered_rows_of(c));
    if (d_.own_shard)
      expert_tp_collective(chain, layer, Pass::kForward, "experts.tp.reducescatter" + suffix(c),
                           CollectiveOp::kReduceScatter, d_.local_rows(ep, c), prefix);
    combined.push_back(all_to_all(chain, layer, Pass::kForward, "combine", false, prefix, c));
  }
  chain.last = combined.back();
  // The weighted sum of each token's k rows, plus the shared experts' output.
  TaskName unpermute = name(layer, Pass::kForward, prefix + "unpermute", stage, Op::kDecode);
  e_.kernel(chain, unpermute, e_.elementwise(rows * d_.hidden + (d_.shared_ffn > 0 ? d_.tokens * d_.hidden : 0),
                                             d_.tokens * d_.hidden));
  after_chunks(chain, combined);
  if (shared.last && shared.last != chain.last) e_.graph().add_dependency(*shared.last, *chain.last);
}

// An FFN's backward (fc2, its activation, fc1), as `batch` GEMMs of `gemm_rows` rows each over the
// activation's `act_rows`: the shared experts (one GEMM over every token) or the routed ones (one
// per local expert, for one chunk's rows). A split backward runs the input gradients (B) and the
// weight gradients (W) apart; a whole one puts the weight gradients beside the chain.
void MoeMlp::ffn_backward(Chain& chain, int layer, BackwardPart part, const FfnBackward& f) {
  const bool input = part != BackwardPart::kWeight;
  const bool weight = part != BackwardPart::kInput;
  const bool side = part == BackwardPart::kAll;
  const auto task = [&](const std::string& what) {
    return name(layer, Pass::kBackward, f.what + what + f.chunk, f.what);
  };
  if (input) fp8_grad(chain, layer, f.what + ".fc2", f.batch * f.gemm_rows * d_.hidden, f.chunk);
  if (input) e_.grouped_gemm(chain, task(".fc2.dgrad"), e_.gemm(f.batch, f.gemm_rows, f.ffn, d_.hidden, GemmLayout::kNT));
  if (weight)
    e_.grouped_gemm(chain, task(".fc2.wgrad"), e_.gemm(f.batch, f.ffn, d_.hidden, f.gemm_rows, GemmLayout::kTN), side);
  if (input) {
    TaskName act = task(".act");
    act.kernel = Op::kActivation;
    e_.kernel(chain, act, e_.elementwise(f.act_rows * (f.fc1_out + f.ffn), f.act_rows * f.fc1_out));
  }
  if (input) fp8_grad(chain, layer, f.what + ".fc1", f.batch * f.gemm_rows * f.fc1_out, f.chunk);
  if (input) e_.grouped_gemm(chain, task(".fc1.dgrad"), e_.gemm(f.batch, f.gemm_rows, d_.hidden, f.fc1_out, GemmLayout::kNT));
  if (weight)
    e_.grouped_gemm(chain, task(".fc1.wgrad"), e_.gemm(f.batch, d_.hidden, f.fc1_out, f.gemm_rows, GemmLayout::kTN), side);
}

void MoeMlp::shared_backward(Chain& chain, int layer, BackwardPart part) {
  if (d_.shared_ffn == 0) return;
  const bool collectives = d_.own_shard && part != BackwardPart::kWeight;
  if (collectives) shared_tp_collective(chain, layer, Pass::kBackward, "shared.tp.allgather", CollectiveOp::kAllGather, "");
  ffn_backward(chain, layer, part, {"shared", "", 1, d_.shared_tokens, d_.shared_tokens, d_.shared_ffn, d_.shared_fc1_out});
  if (collectives)
    shared_tp_collective(chain, layer, Pass::kBackward, "shared.tp.reducescatter", CollectiveOp::kReduceScatter, "");
}

void MoeMlp::experts_backward(Chain& chain, int layer, BackwardPart part, int c) {
  const int ep = static_cast<int>(e_.shape().expert_group(chain.stage).size());
  ffn_backward(chain, layer, part,
               {"experts", suffix(c), d_.local_experts, d_.rows_per_local_expert(ep, c), d_.local_rows(ep, c),
                d_.expert_ffn, d_.expert_fc1_out});
}

void MoeMlp::backward(Chain& chain, int layer, BackwardPart part) {
  const std::int64_t rows = d_.rows_sent();
  const bool input = part != BackwardPart::kWeight;
  if (!input) {
    // The weight gradients alone: the experts' (over every chunk's rows at once, on every chunk's
    // T_DI and T_M restored again under memory reuse), the shared experts' and the router's.
    std::vector<Restored> restored;
    if (d_.strategy != MemoryStrategy::kNone) {
      const std::optional<TaskIndex> start = chain.last;
      for (int c = 0; c < d_.chunks; ++c) restored.push_back(restore(chain, layer, c, start, part, ".w"));
    }
    const auto first = static_cast<TaskIndex>(e_.graph().num_tasks());
    experts_backward(chain, layer, part, MoeDims::kWhole);
    for (const Restored& r : restored) release(r, first);
    shared_backward(chain, layer, part);
    e_.kernel(chain, name(layer, Pass::kBackward, "router.wgrad", "router"),
              e_.storage_gemm(1, d_.hidden, d_.experts, d_.tokens));
    return;
  }
  e_.kernel(chain, name(layer, Pass::kBackward, "unpermute", "router", Op::kDecode),
            e_.elementwise(d_.tokens * d_.hidden + rows * d_.hidden, rows * d_.hidden));
  const std::optional<TaskIndex> start = chain.last;
  Chain shared = chain;
  const std::vector<std::optional<TaskIndex>> gradients =
      to_experts(chain, layer, Pass::kBackward, "combine", "", std::nullopt);
  shared_backward(shared, layer, part);
  const int ep = static_cast<int>(e_.shape().expert_group(chain.stage).size());
  std::vector<std::optional<TaskIndex>> sent_back;
  for (int c = 0; c < d_.chunks; ++c) {
    chain.last = gradients[static_cast<std::size_t>(c)];
    if (d_.own_shard)
      expert_tp_collective(chain, layer, Pass::kBackward, "experts.tp.allgather" + suffix(c), CollectiveOp::kAllGather,
                           d_.local_rows(ep, c), "");
    dispatcher_.sort_chunks(chain, layer, Pass::kBackward, "combine", false, "", gathered_rows_of(c));
    const bool reuses = d_.strategy != MemoryStrategy::kNone;
    const Restored restored = reuses ? restore(chain, layer, c, start, part) : Restored{};
    const auto first = static_cast<TaskIndex>(e_.graph().num_tasks());
    experts_backward(chain, layer, part, c);
    if (reuses) release(restored, first);
    dispatcher_.sort_chunks(chain, layer, Pass::kBackward, "dispatch", true, "", gathered_rows_of(c));
    if (d_.own_shard)
      expert_tp_collective(chain, layer, Pass::kBackward, "experts.tp.reducescatter" + suffix(c),
                           CollectiveOp::kReduceScatter, d_.local_rows(ep, c), "");
    Chain back = chain;
    back.last = all_to_all(chain, layer, Pass::kBackward, "dispatch", false, "", c);
    dispatcher_.probs_all_to_all(back, layer, Pass::kBackward, "dispatch", false, "", rows_of(c));
    sent_back.push_back(back.last);
  }
  chain.last = sent_back.back();
  e_.kernel(chain, name(layer, Pass::kBackward, "permute", "router", Op::kEncode),
            e_.elementwise(rows * d_.hidden + (d_.shared_ffn > 0 ? d_.tokens * d_.hidden : 0), d_.tokens * d_.hidden));
  after_chunks(chain, sent_back);
  if (shared.last && shared.last != chain.last) e_.graph().add_dependency(*shared.last, *chain.last);
  e_.kernel(chain, name(layer, Pass::kBackward, "topk", "router", Op::kTopK),
            e_.elementwise(d_.tokens * (d_.experts + 2 * d_.top_k), d_.tokens * d_.experts));
  e_.kernel(chain, name(layer, Pass::kBackward, "router.dgrad", "router"), e_.storage_gemm(1, d_.tokens, d_.hidden, d_.experts));
  if (part == BackwardPart::kAll)
    e_.kernel(chain, name(layer, Pass::kBackward, "router.wgrad", "router"),
              e_.storage_gemm(1, d_.hidden, d_.experts, d_.tokens), true);
}

}  // namespace moesim
