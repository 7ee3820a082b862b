#include "sim/graph/moe_layer_builder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/checked_math.h"
#include "sim/core/error.h"

namespace moesim {

// Work accounting (all sizes in elements times dims.element_bytes):
//   fwd.route   softmax + top-k over B x E: reads B*E logits, writes B*E probabilities plus B*k
//               scores and B*k indices (indices counted as one element each); 4 FLOP per logit.
//   fwd.encode  scatter T_I into the [E, C, M] dispatch tensor: reads B*M, writes E*C*M; 0 FLOP.
//   fwd.act     reads rows*fc1_out, writes rows*H; 1 FLOP per output element (memory bound).
//   fwd.decode  weighted gather: reads E*C*M + B*k scores, writes B*M; 2*B*k*M FLOP.
//   bwd.decode  reads dY (B*M), T_O (E*C*M) and the scores (B*k); writes dT_O (E*C*M) and
//               dscores (B*k); 2*B*k*M FLOP for each of the two products.
//   bwd.act     reads dA (rows*H) and the saved pre-activation (rows*fc1_out); writes rows*fc1_out.
//   bwd.encode  gather-add of dT_DI back to tokens: reads E*C*M, writes B*M; 1 FLOP per read row
//               element.
//   bwd.route   softmax/top-k backward: reads B*E probabilities + B*k dscores, writes B*E; 4 FLOP
//               per logit.
//
// Data edges beyond the obvious producer -> consumer chain:
//   fwd.decode  <- route (the gate scores) and shared.fc2 (the shared experts' output is added).
//   bwd.route   <- bwd.decode (the scores' gradient is computed by decode's backward).
//   bwd.fc2.wgrad.c{i} <- bwd.combine.c{i} (needs dT_DO, not the activation gradient).
//   bwd.gate.dgrad <- bwd.encode and shared.fc1.dgrad: it accumulates into dT_I, which those wrote.
//   L{l}.bwd.decode <- L{l+1}.bwd.gate.dgrad, the last writer of layer l+1's input gradient.
namespace {

std::string layer_dims_context(const ModelSpec& model) {
  return model.name.empty() ? std::string("model") : "model '" + model.name + "'";
}

[[noreturn]] void reject(const ModelSpec& model, const std::string& rule) {
  throw InputError(model.origin, layer_dims_context(model) + ": " + rule);
}

std::string fmt(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

std::int64_t LayerDims::rows_per_chunk() const {
  return checked_mul(num_experts, capacity / num_chunks);
}

std::int64_t LayerDims::a2a_bytes_per_peer() const {
  return checked_mul({local_experts, capacity / num_chunks, d_model, element_bytes});
}

LayerDims derive_layer_dims(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) {
  const int experts = model.num_experts;
  if (experts <= 0)
    reject(model, "num_experts must be positive, got " + std::to_string(experts));
  if (model.top_k < 1 || model.top_k > experts)
    reject(model, "top_k must be in [1, num_experts = " + std::to_string(experts) + "], got " +
                      std::to_string(model.top_k));
  const double f = model.capacity_factor;
  if (!std::isfinite(f) || f <= 0)
    reject(model, "capacity_factor must be positive and finite, got " + fmt(f));
  if (model.d_model <= 0)
    reject(model, "d_model must be positive, got " + std::to_string(model.d_model));
  if (model.d_ffn <= 0) reject(model, "d_ffn must be positive, got " + std::to_string(model.d_ffn));
  if (model.shared_experts.count < 0)
    reject(model, "shared_experts.count must not be negative, got " +
                      std::to_string(model.shared_experts.count));
  if (model.shared_experts.count > 0 && model.shared_experts.d_ffn <= 0)
    reject(model, "shared_experts.d_ffn must be positive when shared_experts.count = " +
                      std::to_string(model.shared_experts.count) + ", got " +
                      std::to_string(model.shared_experts.d_ffn));
  if (run.tokens_per_gpu <= 0)
    throw InputError("tokens per GPU must be positive, got " + std::to_string(run.tokens_per_gpu));
  if (run.num_chunks < 1)
    throw InputError("num_chunks must be at least 1, got " + std::to_string(run.num_chunks));
  if (run.num_moe_layers < 1)
    throw InputError("num_moe_layers must be at least 1, got " + std::to_string(run.num_moe_layers));

  const int gpus = cluster.num_gpus();
  if (gpus <= 0)
    throw InputError(cluster.origin, "cluster '" + cluster.name + "' has " + std::to_string(gpus) +
                                         " GPUs; it needs at least 1");
  if (run.ep_size < 0)
    throw InputError("ep_size must be positive (or 0 for every GPU), got " +
                     std::to_string(run.ep_size));
  const int ep = run.ep_size == 0 ? gpus : run.ep_size;
  if (ep > gpus || gpus % ep != 0)
    throw InputError("ep_size " + std::to_string(ep) + " must divide the cluster's GPU count " +
                     std::to_string(gpus));
  if (experts % ep != 0)
    reject(model, "num_experts " + std::to_string(experts) + " is not divisible by ep_size " +
                      std::to_string(ep));

  // C = floor(k*f*B/E). The relative slack absorbs the binary representation error of f (1.1 is
  // stored as 1.1000000000000000888): without it, k*f*B/E = 110 could floor to 109.
  const std::int64_t kb = checked_mul(model.top_k, run.tokens_per_gpu);
  const double raw = static_cast<double>(kb) * f / static_cast<double>(experts);
  if (!(raw < 9.0e18))
    throw InputError("capacity k*f*B/E = " + fmt(raw) + " does not fit in 64 bits");
  const auto unrounded = static_cast<std::int64_t>(std::floor(raw * (1.0 + 1e-12)));
  const std::int64_t n = run.num_chunks;
  const std::int64_t capacity = unrounded - unrounded % n;
  if (capacity < n)
    throw InputError("more chunks than capacity slots: capacity C = floor(k*f*B/E) = floor(" +
                     std::to_string(model.top_k) + "*" + fmt(f) + "*" +
                     std::to_string(run.tokens_per_gpu) + "/" + std::to_string(experts) + ") = " +
                     std::to_string(unrounded) + " is less than num_chunks n = " +
                     std::to_string(n) + " (C is rounded down to a multiple of n)");

  LayerDims d;
  d.tokens = run.tokens_per_gpu;
  d.d_model = model.d_model;
  d.d_ffn = model.d_ffn;
  d.fc1_out = model.fc1_out_dim();
  d.num_experts = experts;
  d.top_k = model.top_k;
  d.ep_size = ep;
  d.local_experts = experts / ep;
  d.num_chunks = run.num_chunks;
  d.capacity = capacity;
  d.rows_per_expert_chunk = checked_mul(ep, capacity) / n;
  d.element_bytes = model.element_bytes();
  d.gemm_dtype = model.gemm_dtype;

  // Every size the graph and the memory accounting derive, checked once here so that later
  // products cannot overflow: the dispatch tensor of all layers, FC1's output, the weights.
  const std::int64_t layers = run.num_moe_layers;
  checked_mul({experts, capacity, d.d_model, d.element_bytes, layers});
  checked_mul({experts, capacity, d.fc1_out, d.element_bytes, layers});
  checked_mul({d.tokens, d.d_model, d.element_bytes, layers});
  checked_mul({2, experts, capacity, d.d_model, d.fc1_out});
  checked_mul({d.local_experts, d.d_model, d.fc1_out, d.element_bytes, layers});
  checked_mul({2, d.tokens, d.d_model, experts});
  if (model.shared_experts.count > 0) {
    const std::int64_t width = checked_mul(model.shared_experts.count, model.shared_experts.d_ffn);
    checked_mul({2, d.tokens, d.d_model, width, 2, layers});
  }
  return d;
}

namespace {

// One logical task: its index on every simulated rank (a collective has one index, repeated).
using Node = std::vector<TaskIndex>;

class Builder {
 public:
  Builder(const ModelSpec& model, const RunSpec& run, const LayerDims& dims, TaskGraph& graph)
      : model_(model), run_(run), d_(dims), g_(graph) {
    std::vector<int> all;
    for (int r = 0; r < d_.ep_size; ++r) all.push_back(r);
    group_ = g_.add_group(std::move(all));
    eb_ = d_.element_bytes;
    ec_m_ = checked_mul({d_.num_experts, d_.capacity, d_.d_model});
    if (model_.shared_experts.count > 0) {
      shared_h_ = checked_mul(model_.shared_experts.count, model_.shared_experts.d_ffn);
      shared_fc1_out_ = model_.activation == Activation::kSwiglu ? checked_mul(2, shared_h_) : shared_h_;
    }
  }

  void build() {
    const int layers = run_.num_moe_layers;
    std::vector<Node> fwd_decode(layers);
    Node prev_output;
    for (int l = 0; l < layers; ++l) {
      fwd_decode[l] = forward_layer(l, prev_output);
      prev_output = fwd_decode[l];
    }
    Node upstream_grad = fwd_decode[layers - 1];
    for (int l = layers - 1; l >= 0; --l) upstream_grad = backward_layer(l, upstream_grad);
  }

 private:
  // Chunk processing order of a pass and the issue order of its all-to-alls.
  struct CommOrder {
    // (is_second, chunk) in issue order; the first collective of a chunk is dispatch in forward
    // (S) and combine-of-gradients in backward (G).
    std::vector<std::pair<bool, int>> issue;
    StreamClass first_stream = StreamClass::kCommDispatch;
    StreamClass second_stream = StreamClass::kCommDispatch;
    std::vector<int> compute_chunks;
  };

  CommOrder comm_order(Pass pass) const {
    const int n = d_.num_chunks;
    CommOrder o;
    for (int i = 0; i < n; ++i) o.compute_chunks.push_back(i);
    auto interleave = [&](const std::vector<int>& chunks) {
      // first(c0) | first(c1) second(c0) | ... | second(c_last)
      for (std::size_t j = 0; j <= chunks.size(); ++j) {
        if (j < chunks.size()) o.issue.emplace_back(false, chunks[j]);
        if (j > 0) o.issue.emplace_back(true, chunks[j - 1]);
      }
    };
    switch (run_.order) {
      case OrderPolicy::kMPipeMoE:
        if (pass == Pass::kForward) {
          o.second_stream = StreamClass::kCommCombine;
          for (int i = 0; i < n; ++i) o.issue.emplace_back(false, i);
          for (int i = 0; i < n; ++i) o.issue.emplace_back(true, i);
        } else {
          interleave(o.compute_chunks);
        }
        break;
      case OrderPolicy::kFasterMoE:
        for (int i = 0; i < n; ++i) o.issue.emplace_back(false, i);
        for (int i = 0; i < n; ++i) o.issue.emplace_back(true, i);
        break;
      case OrderPolicy::kTutel:
        if (pass == Pass::kBackward) std::reverse(o.compute_chunks.begin(), o.compute_chunks.end());
        interleave(o.compute_chunks);
        break;
      case OrderPolicy::kSequential:
        for (int i = 0; i < n; ++i) {
          o.issue.emplace_back(false, i);
          o.issue.emplace_back(true, i);
        }
        break;
    }
    return o;
  }

  std::string id(int layer, Pass pass, const std::string& rest, int chunk = -1) const {
    std::string s = "L" + std::to_string(layer) + "." + std::string(to_string(pass)) + "." + rest;
    if (chunk >= 0) s += ".c" + std::to_string(chunk);
    return s;
  }

  Node compute(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
               Work work) {
    Node node;
    for (int r : g_.simulated_ranks()) {
      Task t;
      t.id = id(layer, pass, rest, chunk);
      t.rank = r;
      t.stream = StreamClass::kCompute;
      t.work = work;
      t.layer = layer;
      t.pass = pass;
      t.stage = stage;
      t.chunk = chunk;
      node.push_back(g_.add_task(std::move(t)));
    }
    return node;
  }

  Node all_to_all(int layer, Pass pass, const std::string& stage, int chunk, StreamClass stream) {
    Task t;
    t.id = id(layer, pass, stage, chunk);
    t.rank = -1;
    t.stream = stream;
    t.work = CollectiveWork{CollectiveOp::kAllToAll, group_, d_.a2a_bytes_per_peer()};
    t.layer = layer;
    t.pass = pass;
    t.stage = stage;
    t.chunk = chunk;
    const TaskIndex i = g_.add_task(std::move(t));
    return Node(g_.simulated_ranks().size(), i);
  }

  GemmWork gemm(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n) const {
    GemmWork w;
    w.batch = batch;
    w.m = m;
    w.n = n;
    w.k = k;
    w.dtype = d_.gemm_dtype;
    w.element_bytes = eb_;
    return w;
  }

  ElementwiseWork elementwise(std::int64_t read_elems, std::int64_t written_elems,
                              std::int64_t flops) const {
    return ElementwiseWork{checked_mul(read_elems, eb_), checked_mul(written_elems, eb_), flops};
  }

  void edge(const Node& from, const Node& to) {
    for (std::size_t i = 0; i < from.size(); ++i) g_.add_dependency(from[i], to[i], DepKind::kData);
  }

  Node forward_layer(int l, const Node& input) {
    const Pass p = Pass::kForward;
    const std::int64_t B = d_.tokens, M = d_.d_model, E = d_.num_experts, k = d_.top_k;
    const std::int64_t rows = d_.rows_per_expert_chunk;
    const std::int64_t rows_all = checked_mul(rows, d_.local_experts);

    const Node gate = compute(l, p, "gate", "gate", -1, gemm(1, B, M, E));
    if (!input.empty()) edge(input, gate);
    const std::int64_t be = checked_mul(B, E);
    const Node route = compute(l, p, "route", "route", -1,
                               elementwise(be, be + checked_mul({2, B, k}), checked_mul(4, be)));
    edge(gate, route);
    const Node encode = compute(l, p, "encode", "encode", -1, elementwise(checked_mul(B, M), ec_m_, 0));
    edge(route, encode);

    Node shared_out;
    if (shared_h_ > 0) {
      const Node fc1 = compute(l, p, "shared.fc1", "shared", -1, gemm(1, B, M, shared_fc1_out_));
      if (!input.empty()) edge(input, fc1);
      const Node act = compute(l, p, "shared.act", "shared", -1,
                               elementwise(checked_mul(B, shared_fc1_out_), checked_mul(B, shared_h_),
                                           checked_mul(B, shared_h_)));
      edge(fc1, act);
      shared_out = compute(l, p, "shared.fc2", "shared", -1, gemm(1, B, shared_h_, M));
      edge(act, shared_out);
    }

    const CommOrder order = comm_order(p);
    const int n = d_.num_chunks;
    std::vector<Node> dispatch(n), combine(n), fc2(n);
    // Collectives first in their issue order, then compute in chunk order: each stream's order is
    // what matters, and data edges are added once both ends exist.
    for (const auto& [second, c] : order.issue) {
      if (!second)
        dispatch[c] = all_to_all(l, p, "dispatch", c, order.first_stream);
      else
        combine[c] = all_to_all(l, p, "combine", c, order.second_stream);
    }
    for (int c : order.compute_chunks) {
      const Node fc1 = compute(l, p, "fc1", "fc1", c, gemm(d_.local_experts, rows, M, d_.fc1_out));
      const Node act = compute(l, p, "act", "act", c,
                               elementwise(checked_mul(rows_all, d_.fc1_out),
                                           checked_mul(rows_all, d_.d_ffn),
                                           checked_mul(rows_all, d_.d_ffn)));
      fc2[c] = compute(l, p, "fc2", "fc2", c, gemm(d_.local_experts, rows, d_.d_ffn, M));
      edge(encode, dispatch[c]);
      edge(dispatch[c], fc1);
      edge(fc1, act);
      edge(act, fc2[c]);
      edge(fc2[c], combine[c]);
    }
    // Decode reads the combined rows and the scores, plus the shared experts' output it adds.
    const std::int64_t shared_read = shared_h_ > 0 ? checked_mul(B, M) : 0;
    const Node decode = compute(l, p, "decode", "decode", -1,
                                elementwise(ec_m_ + checked_mul(B, k) + shared_read, checked_mul(B, M),
                                            checked_mul({2, B, k, M})));
    for (int c = 0; c < n; ++c) edge(combine[c], decode);
    edge(route, decode);
    if (!shared_out.empty()) edge(shared_out, decode);
    return decode;
  }

  Node backward_layer(int l, const Node& upstream_grad) {
    const Pass p = Pass::kBackward;
    const std::int64_t B = d_.tokens, M = d_.d_model, E = d_.num_experts, k = d_.top_k;
    const std::int64_t H = d_.d_ffn, F = d_.fc1_out, El = d_.local_experts;
    const std::int64_t rows = d_.rows_per_expert_chunk;
    const std::int64_t rows_all = checked_mul(rows, El);
    const std::int64_t bk = checked_mul(B, k);

    const Node decode = compute(l, p, "decode", "decode", -1,
                                elementwise(checked_mul(B, M) + ec_m_ + bk, ec_m_ + bk,
                                            checked_mul({4, B, k, M})));
    edge(upstream_grad, decode);

    // Shared experts right after decode: they run on the compute stream while the first
    // all-to-all of the routed gradients is in flight.
    Node shared_dgrad;
    if (shared_h_ > 0) {
      const Node fc2_d = compute(l, p, "shared.fc2.dgrad", "shared", -1, gemm(1, B, M, shared_h_));
      edge(decode, fc2_d);
      const Node act = compute(l, p, "shared.act", "shared", -1,
                               elementwise(checked_mul(B, shared_h_) + checked_mul(B, shared_fc1_out_),
                                           checked_mul(B, shared_fc1_out_),
                                           checked_mul(B, shared_fc1_out_)));
      edge(fc2_d, act);
      const Node fc2_w = compute(l, p, "shared.fc2.wgrad", "shared", -1, gemm(1, shared_h_, B, M));
      edge(decode, fc2_w);
      const Node fc1_w = compute(l, p, "shared.fc1.wgrad", "shared", -1, gemm(1, M, B, shared_fc1_out_));
      edge(act, fc1_w);
      shared_dgrad = compute(l, p, "shared.fc1.dgrad", "shared", -1, gemm(1, B, shared_fc1_out_, M));
      edge(act, shared_dgrad);
    }

    const CommOrder order = comm_order(p);
    const int n = d_.num_chunks;
    std::vector<Node> grad_combine(n), grad_dispatch(n);
    for (const auto& [second, c] : order.issue) {
      if (!second)
        grad_combine[c] = all_to_all(l, p, "combine", c, order.first_stream);
      else
        grad_dispatch[c] = all_to_all(l, p, "dispatch", c, order.second_stream);
    }
    for (int c : order.compute_chunks) {
      const Node fc2_d = compute(l, p, "fc2.dgrad", "fc2", c, gemm(El, rows, M, H));
      const Node act = compute(l, p, "act", "act", c,
                               elementwise(checked_mul(rows_all, H) + checked_mul(rows_all, F),
                                           checked_mul(rows_all, F), checked_mul(rows_all, F)));
      const Node fc2_w = compute(l, p, "fc2.wgrad", "fc2", c, gemm(El, H, rows, M));
      const Node fc1_w = compute(l, p, "fc1.wgrad", "fc1", c, gemm(El, M, rows, F));
      const Node fc1_d = compute(l, p, "fc1.dgrad", "fc1", c, gemm(El, rows, F, M));
      edge(decode, grad_combine[c]);
      edge(grad_combine[c], fc2_d);
      edge(fc2_d, act);
      edge(grad_combine[c], fc2_w);
      edge(act, fc1_w);
      edge(act, fc1_d);
      edge(fc1_d, grad_dispatch[c]);
    }
    const Node encode = compute(l, p, "encode", "encode", -1,
                                elementwise(ec_m_, checked_mul(B, M), ec_m_));
    for (int c = 0; c < n; ++c) edge(grad_dispatch[c], encode);
    const std::int64_t be = checked_mul(B, E);
    const Node route = compute(l, p, "route", "route", -1, elementwise(be + bk, be, checked_mul(4, be)));
    edge(decode, route);
    const Node gate_d = compute(l, p, "gate.dgrad", "gate", -1, gemm(1, B, E, M));
    edge(route, gate_d);
    edge(encode, gate_d);
    if (!shared_dgrad.empty()) edge(shared_dgrad, gate_d);
    const Node gate_w = compute(l, p, "gate.wgrad", "gate", -1, gemm(1, E, B, M));
    edge(route, gate_w);
    return gate_d;
  }

  const ModelSpec& model_;
  const RunSpec& run_;
  const LayerDims& d_;
  TaskGraph& g_;
  GroupId group_ = 0;
  int eb_ = 4;
  std::int64_t ec_m_ = 0;
  std::int64_t shared_h_ = 0;
  std::int64_t shared_fc1_out_ = 0;
};

}  // namespace

TaskGraph build_moe_graph(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                          const BuildOptions& options) {
  const LayerDims dims = derive_layer_dims(model, cluster, run);
  // Refuse graphs too large to hold, before allocating them: per layer and simulated rank about
  // 12 whole-layer tasks and 10 per chunk, plus 4 collectives per chunk.
  const std::int64_t simulated = options.representative_rank ? 1 : dims.ep_size;
  const std::int64_t estimate = checked_mul(
      run.num_moe_layers,
      checked_add(checked_mul(simulated, checked_add(12, checked_mul(10, dims.num_chunks))),
                  checked_mul(4, dims.num_chunks)));
  if (estimate > kMaxGraphTasks) {
    throw InputError("the task graph would have about " + std::to_string(estimate) + " tasks (" +
                     std::to_string(run.num_moe_layers) + " layers x " + std::to_string(simulated) +
                     " simulated ranks x " + std::to_string(dims.num_chunks) +
                     " chunks), more than the limit of " + std::to_string(kMaxGraphTasks) +
                     "; simulate fewer layers, chunks or ranks");
  }
  std::vector<int> ranks;
  if (options.representative_rank) {
    ranks.push_back(0);
  } else {
    for (int r = 0; r < dims.ep_size; ++r) ranks.push_back(r);
  }
  TaskGraph graph(dims.ep_size, std::move(ranks));
  Builder(model, run, dims, graph).build();
  return graph;
}

}  // namespace moesim
