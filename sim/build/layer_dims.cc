#include "sim/build/layer_dims.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/checked_math.h"
#include "sim/core/error.h"
#include "sim/spec/model_parameters.h"

namespace moesim {

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

std::int64_t LayerDims::chunk_capacity(int c) const {
  // The first chunks are the largest whole-block ones; the last may be larger still with the
  // slots the blocks leave.
  if (c == kLargestChunk) return std::max(chunk_capacity(0), chunk_capacity(num_chunks - 1));
  MOESIM_CHECK(c >= 0 && c < num_chunks, "chunk index within the layer's chunks");
  const std::int64_t blocks = chunk_share(capacity / chunk_alignment, c, num_chunks);
  return checked_mul(blocks, chunk_alignment) + (c == num_chunks - 1 ? capacity % chunk_alignment : 0);
}

bool LayerDims::even_chunks() const { return chunk_capacity(0) == chunk_capacity(num_chunks - 1); }

std::vector<std::int64_t> LayerDims::chunk_capacities() const {
  std::vector<std::int64_t> sizes;
  for (int c = 0; c < num_chunks; ++c) sizes.push_back(chunk_capacity(c));
  return sizes;
}

std::int64_t LayerDims::rows_per_chunk(int c) const { return checked_mul(num_experts, chunk_capacity(c)); }

std::int64_t LayerDims::rows_per_expert_chunk(int c) const { return checked_mul(ep_size, chunk_capacity(c)); }

std::int64_t LayerDims::shared_chunk_capacity(int c) const {
  const std::int64_t share = token_share();
  return (chunk_capacity(c) + share - 1) / share;
}

std::int64_t LayerDims::a2a_bytes_per_peer(int c) const {
  return checked_mul({local_experts, shared_chunk_capacity(c), d_model, element_bytes});
}

std::int64_t LayerDims::gathered_rows_per_chunk(int c) const {
  return checked_mul({num_experts, token_share(), shared_chunk_capacity(c)});
}

void check_tensor_parallel_degree(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) {
  require_moe_layers(model);
  const int gpus = cluster.num_gpus();
  const int tp = run.tp_size;
  if (tp < 1) throw InputError("tp_size must be at least 1, got " + std::to_string(tp));
  if (tp > gpus || gpus % tp != 0)
    throw InputError("tp_size " + std::to_string(tp) + " must divide the cluster's GPU count " +
                     std::to_string(gpus));
  if (tp > 1) {
    if (cluster.node.loopback)
      throw InputError(cluster.origin, "tp_size " + std::to_string(tp) + ": loopback node " + cluster.node.name +
                                           " describes `moesim run --loopback`, which runs expert parallelism "
                                           "only; tensor parallelism needs a node of real GPUs");
    if (model.d_ffn % tp != 0)
      reject(model, "d_ffn " + std::to_string(model.d_ffn) + " is not divisible by tp_size " + std::to_string(tp) +
                        " (each tensor-parallel rank holds d_ffn/tp columns of FC1 and rows of FC2)");
    const std::int64_t shared_width = checked_mul(model.shared_experts.count, model.shared_experts.d_ffn);
    if (shared_width % tp != 0)
      reject(model, "the shared experts' width count x d_ffn = " + std::to_string(shared_width) +
                        " is not divisible by tp_size " + std::to_string(tp));
    if (run.all_to_all == AllToAllAlgorithm::kHierarchical)
      throw InputError("the 2DH all-to-all (--a2a 2dh) needs expert-parallel groups of whole nodes; with tp_size " +
                       std::to_string(tp) + " each group holds one tensor index of every node: use --a2a pairwise");
    if (!run.routing.balanced())
      throw InputError("routing " + run.routing.to_string() + " with tp_size " + std::to_string(tp) +
                       ": imbalanced routing is simulated for expert parallelism only (tp_size 1); with "
                       "tensor parallelism use --routing uniform");
  }
}

namespace {

// The model's own sizes.
void check_model(const ModelSpec& model) {
  require_moe_layers(model);
  const int experts = model.num_experts;
  if (model.top_k < 1 || model.top_k > experts)
    reject(model, "top_k must be in [1, num_experts = " + std::to_string(experts) + "], got " +
                      std::to_string(model.top_k));
  if (!std::isfinite(model.capacity_factor) || model.capacity_factor <= 0)
    reject(model, "capacity_factor must be positive and finite, got " + fmt(model.capacity_factor));
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
}

// The run's options on their own, and the offloading strategies' need of PCIe.
void check_run(const ClusterSpec& cluster, const RunSpec& run) {
  if (run.tokens_per_gpu <= 0)
    throw InputError("tokens per GPU must be positive, got " + std::to_string(run.tokens_per_gpu));
  if (run.num_chunks < 1)
    throw InputError("num_chunks must be at least 1, got " + std::to_string(run.num_chunks));
  if (run.num_moe_layers < 1)
    throw InputError("num_moe_layers must be at least 1, got " + std::to_string(run.num_moe_layers));

  if (run.slots != 1 && run.slots != 2)
    throw InputError("slots must be 1 or 2 (buffer slots per reused tensor), got " +
                     std::to_string(run.slots));
  if (run.checkpoint != ActivationCheckpointing::kNone && run.strategy != MemoryStrategy::kNone)
    throw InputError("activation checkpointing (" + std::string(to_string(run.checkpoint)) +
                     ") re-runs each layer's forward before its backward; it replaces the MPipeMoE strategies, which "
                     "restore what chunk reuse overwrote: use strategy none with it (got " +
                     std::string(to_string(run.strategy)) + ")");
  if (run.strategy == MemoryStrategy::kS1 || run.strategy == MemoryStrategy::kS2 ||
      run.strategy == MemoryStrategy::kS3) {
    if (!(cluster.node.pcie_h2d.effective_bandwidth() > 0) ||
        !(cluster.node.pcie_d2h.effective_bandwidth() > 0))
      throw InputError(cluster.origin,
                       "memory strategy " + std::string(to_string(run.strategy)) +
                           " offloads tensors to host memory over PCIe, but cluster '" + cluster.name +
                           "' has no PCIe bandwidth (pcie_h2d/pcie_d2h are 0): offload needs a node "
                           "file with a pcie section");
  }

  if (run.zero_stage != 0 && run.zero_stage != 1)
    throw InputError("zero_stage must be 0 (optimizer states whole on every rank) or 1 (sharded over the "
                     "data-parallel group), got " + std::to_string(run.zero_stage));
}

// The expert-parallel degree N: run.ep_size, or 0 for the GPUs / tp; tp x N divides the GPUs and
// N the experts.
int expert_parallel_degree(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) {
  const int experts = model.num_experts;
  const int gpus = cluster.num_gpus();
  if (gpus <= 0)
    throw InputError(cluster.origin, "cluster '" + cluster.name + "' has " + std::to_string(gpus) +
                                         " GPUs; it needs at least 1");
  check_tensor_parallel_degree(model, cluster, run);
  const int tp = run.tp_size;
  if (run.ep_size < 0)
    throw InputError("ep_size must be positive (or 0 for every GPU), got " +
                     std::to_string(run.ep_size));
  const int ep = run.ep_size == 0 ? gpus / tp : run.ep_size;
  if (ep > gpus || gpus % checked_mul(ep, tp) != 0)
    throw InputError(tp == 1 ? "ep_size " + std::to_string(ep) + " must divide the cluster's GPU count " +
                                   std::to_string(gpus)
                             : "tp_size x ep_size = " + std::to_string(tp) + " x " + std::to_string(ep) +
                                   " must divide the cluster's GPU count " + std::to_string(gpus));
  if (experts % ep != 0)
    reject(model, "num_experts " + std::to_string(experts) + " is not divisible by ep_size " +
                      std::to_string(ep) +
                      (run.ep_size == 0 && tp > 1 ? " (ep_size 0: the GPUs / tp_size = " + std::to_string(gpus) +
                                                        " / " + std::to_string(tp) + ")"
                                                  : std::string()));
  return ep;
}

// C = floor(k*f*B/E), at least one slot (one block of chunk_alignment) per chunk.
std::int64_t capacity_slots(const ModelSpec& model, const RunSpec& run) {
  const int experts = model.num_experts;
  const double f = model.capacity_factor;
  // The relative slack absorbs the binary representation error of f (1.1 is
  // stored as 1.1000000000000000888): without it, k*f*B/E = 110 could floor to 109.
  const std::int64_t kb = checked_mul(model.top_k, run.tokens_per_gpu);
  const double raw = static_cast<double>(kb) * f / static_cast<double>(experts);
  if (!(raw < 9.0e18))
    throw InputError("capacity k*f*B/E = " + fmt(raw) + " does not fit in 64 bits");
  const auto capacity = static_cast<std::int64_t>(std::floor(raw * (1.0 + 1e-12)));
  const std::int64_t n = run.num_chunks;
  if (capacity < n)
    throw InputError("more chunks than capacity slots: capacity C = floor(k*f*B/E) = floor(" +
                     std::to_string(model.top_k) + "*" + fmt(f) + "*" + std::to_string(run.tokens_per_gpu) + "/" +
                     std::to_string(experts) + ") = " + std::to_string(capacity) + " is less than num_chunks n = " +
                     std::to_string(n) + " (every chunk needs at least one slot per expert)");
  const int align = run.chunk_alignment;
  if (align < 1 || align > kMaxChunkAlignment)
    throw InputError("chunk_alignment must be in [1, " + std::to_string(kMaxChunkAlignment) + "], got " +
                     std::to_string(align));
  if (capacity / align < n)
    throw InputError("capacity C = " + std::to_string(capacity) + " holds fewer than num_chunks n = " +
                     std::to_string(n) + " blocks of chunk_alignment " + std::to_string(align) +
                     " slots (every chunk but the last is a whole number of blocks, at least one)");
  return capacity;
}

// Every size the graph and the memory accounting derive, checked once here so that later
// products cannot overflow: the dispatch tensor of all layers, FC1's output, the weights.
void check_sizes_fit(const LayerDims& d, const ModelSpec& model, const RunSpec& run) {
  const std::int64_t experts = d.num_experts, capacity = d.capacity;
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
}

}  // namespace

LayerDims derive_layer_dims(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) {
  check_model(model);
  check_run(cluster, run);
  const int gpus = cluster.num_gpus();
  const int ep = expert_parallel_degree(model, cluster, run);
  const std::int64_t capacity = capacity_slots(model, run);
  const int tp = run.tp_size;
  const int experts = model.num_experts;
  const int align = run.chunk_alignment;
  // With duplicate token dropping every chunk's slots split over the tensor-parallel ranks, as
  // TED's drop along the capacity dimension requires (a chunk they do not divide is padded).
  const bool dtd = tp > 1 && run.drop_duplicate_tokens;

  LayerDims d;
  d.tokens = run.tokens_per_gpu;
  d.d_model = model.d_model;
  d.d_ffn = model.d_ffn;
  d.fc1_out = model.fc1_out_dim();
  d.num_experts = experts;
  d.top_k = model.top_k;
  d.ep_size = ep;
  d.tp_size = tp;
  d.dp_size = gpus / (tp * ep);
  d.drop_duplicate_tokens = dtd;
  d.local_experts = experts / ep;
  d.num_chunks = run.num_chunks;
  d.capacity = capacity;
  d.chunk_alignment = align;
  d.element_bytes = model.element_bytes();
  d.storage_dtype = model.dtype;
  d.gemm_dtype = model.gemm_dtype;
  check_sizes_fit(d, model, run);
  return d;
}

RoutingShape routing_shape(const LayerDims& dims) {
  RoutingShape shape;
  shape.ranks = dims.ep_size;
  shape.experts = dims.num_experts;
  shape.top_k = dims.top_k;
  shape.tokens = dims.tokens;
  shape.capacity = dims.capacity;
  shape.chunks = dims.num_chunks;
  return shape;
}

std::optional<RoutingPlan> make_layer_routing(const LayerDims& dims, const RunSpec& run) {
  if (run.routing.balanced()) return std::nullopt;
  return make_routing_plan(run.routing, routing_shape(dims), run.seed);
}

}  // namespace moesim
