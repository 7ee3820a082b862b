#include "sim/graph/moe_layer_builder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/core/checked_math.h"
#include "sim/core/error.h"
#include "sim/graph/memory_sizes.h"
#include "sim/spec/model_parameters.h"

namespace moesim {

// Work accounting (all sizes in elements times dims.element_bytes):
//   fwd.route   softmax + top-k over B x E: reads B*E logits, writes B*E probabilities plus B*k
//               scores and B*k indices (indices counted as one element each); 4 FLOP per logit.
//   fwd.encode  scatter T_I into the [E, C, M] dispatch tensor: reads B*M, writes E*C*M; 0 FLOP.
//   fwd.act     reads rows*fc1_out, writes rows*H; 1 FLOP per output element (memory bound).
//   fwd.decode  weighted gather: reads E*C*M + B*k scores, writes B*M; 2*B*k*M FLOP.
//   bwd.decode  reads dY (B*M), T_O (E*C*M) and the scores (B*k); writes dT_O (E*C*M) and
//               dscores (B*k); 2*B*k*M FLOP for each of the two products.
//   bwd.act     reads dA (rows*H) and the saved FC1 output (rows*fc1_out); writes rows*fc1_out.
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
//
// Memory (buffers `L{l}.<tensor>[.c{i}|.slot{s}]` on every simulated rank; R = E*C rows, R/n per chunk;
// bytes = elements * element_bytes). With a routing plan (imbalanced routing) sizes are per rank
// (RankLoad): expert tensors hold the R rows the rank received (slots: its largest chunk), T_O and
// dT_O the rows it sent, and the work above scales the same way (E*C*M becomes sent rows x M). A task allocates its buffers when it starts and frees them
// when it ends; each buffer has at most one allocating and one freeing task.
//   model_states (resident): params, grads, optimizer (layer_model_state_bytes, run.optimizer).
//   host_pinned (resident): host.T_DI (R x M) with s1/s3, host.T_M (R x F) with s1/s2.
//   activations, freed together by bwd.gate.wgrad, the layer's last backward task (the saved
//   tensors of one autograd Function are released together):
//     T_I (B x M; layer 0's allocated by its fwd.gate, layer l's by L{l-1}.fwd.decode, which
//     writes it as its output), T_O (R x M, the first fwd.combine), scores (B x E) and topk
//     (B x k x 8 bytes) from fwd.route when run.count_routing_data, and with strategy none the
//     full-size T_DI (R x M, first fwd.dispatch), T_M (R x F, first fwd.fc1), T_DO (R x M, first
//     fwd.fc2). F = fc1_out: T_M is FC1's output, what the activation's backward needs (H wide
//     for relu / gelu, where it is the papers' T_M; 2H for swiglu, whose backward needs both
//     halves). The activation's output (FC2's input, R/n x H) is recomputed from it where needed
//     and is not a graph buffer, as in the papers (fused into FC2's input).
//   activations with s1-s4, slot buffers instead (MPipeMoE preallocates them once per layer):
//     T_DI.slot{s} (R/n x M, s < min(slots, 2n)), T_DO.slot{s} (R/n x M, s < min(slots, n)) and
//     T_M.slot0 (R/n x F, one slot). The chunk at sequence position q (its processing position g
//     in forward; n + g for a backward restore, which continues the forward's sequence) writes
//     slot q % slots; the first writer of a slot allocates it, and bwd.gate.wgrad frees it with
//     the other saved activations. Writers: fwd.dispatch.c{i} (T_DI), fwd.fc1.c{i} (T_M),
//     fwd.fc2.c{i} (T_DO); in backward bwd.prefetch.T_M.c{i} (s1/s2) or bwd.recompute.fc1.c{i}
//     (s3/s4) restore T_M, bwd.prefetch.T_DI.c{i} (s1/s3) or bwd.redispatch.c{i} (s2/s4) T_DI,
//     into the same slots: backward allocates a slot only when n < slots (T_DI with n = 1). The
//     activation maximum is then T_I + T_O + the slots, MPipeMoE's Eq. 5 exactly.
//   shared experts (when the model has them): shared.T_M (B x Fs, FC1's output, activations,
//     shared.fc1 -> bwd.gate.wgrad with the other saved tensors); temporaries shared.out (B x M,
//     shared.fc2 -> fwd.decode), and in backward shared.dM (B x Fs, shared.fc2.dgrad ->
//     shared.fc1.dgrad), shared.dA (B x Hs, swiglu only: shared.fc2.dgrad -> bwd.shared.act) and
//     shared.dX (B x M, shared.fc1.dgrad -> bwd.gate.dgrad). Fs = Hs, or 2 Hs for swiglu.
//   temporary: dT_O (R x M): bwd.decode -> the last bwd.combine; dT_I (B x M): bwd.encode ->
//     bwd.gate.wgrad in layer 0; in layer l > 0 it is the incoming gradient of the layer below,
//     freed by its last reader there: L{l-1}.bwd.shared.fc2.wgrad with shared experts, else
//     L{l-1}.bwd.decode;
//     the chunk gradients dDO (written by bwd.combine, read by fc2.dgrad/fc2.wgrad), dM (fc2.dgrad
//     -> act -> fc1.wgrad/fc1.dgrad) and dDI (fc1.dgrad -> bwd.dispatch): with strategy none
//     full-size (R x M, R x F, R x M), allocated by the first chunk's task and freed by the last's;
//     with s1-s4 slot buffers dDO.slot{s}, dDI.slot{s} (R/n x M, s < min(slots, n)) and dM.slot0
//     (R/n x F), allocated by bwd.decode and freed by bwd.gate.wgrad (a preallocated pool). dM
//     holds the activation's input gradient (F wide); relu / gelu compute it in place over dA,
//     FC2's input gradient. swiglu cannot (dA is H wide, its gradient 2H): bwd.dA.c{i} (R/n x H,
//     temporary) carries dA from bwd.fc2.dgrad.c{i}, which allocates it, to bwd.act.c{i}, which
//     frees it.
//
// Strategy tasks (MPipeMoE Table II): offload = D2H copy on copy.d2h (stage "offload"), prefetch =
// H2D copy on copy.h2d ("prefetch"), recompute = FC1 GEMM + activation on compute ("recompute"),
// redispatch = an extra all-to-all per chunk on the backward comm stream, issued right after the
// chunk's gradient all-to-all ("redispatch"). Each offload copy is ordered after the compute
// task that last reads its buffer (T_DI after FC1, T_M after FC2) because it is the one that frees
// it. Prefetches wait for the layer's bwd.decode and for their chunk's offload.
//
// Reuse edges (DepKind::kReuse), by position g in the pass's processing order, s = run.slots: the
// writer of a slot waits for the last reader of the chunk that used the slot before it (the slot's
// release), which makes overwriting it safe:
//   fwd.dispatch.c{g} <- the last reader of T_DI of g-s (fwd.fc1, or fwd.offload.T_DI with s1/s3);
//   fwd.fc1.c{g} <- the last reader of T_M of g-1 (fwd.fc2, or fwd.offload.T_M with s1/s2);
//   fwd.fc2.c{g} <- fwd.combine.c{g-s} (sends T_DO of g-s);
//   T_M restore of g <- bwd.fc2.wgrad of g-1; T_DI restore of g <- bwd.fc1.wgrad of g-s;
//   bwd.combine.c{g} <- bwd.fc2.wgrad of g-s (dDO); bwd.fc2.dgrad.c{g} <- bwd.fc1.dgrad of g-1 (dM);
//   bwd.fc1.dgrad.c{g} <- bwd.dispatch of g-s (dDI).
// The backward restores reuse the forward's slots, so the first backward positions wait for the
// last forward chunks' releases. At most s T_DI, s T_DO and one T_M chunk occupy the slots at once.
// With reuse, FasterMoE's forward ("all dispatches, then all combines" on one stream) would deadlock
// on the slots; its dispatches run at most 2s+1 ahead of the combines instead (comm_order).
//
// DeepSpeed-TED (run.tp_size = t > 1; sim/spec/parallel_layout.h for the groups). Per rank the
// expert GEMMs and T_M, dM, dA, host.T_M, the shared experts' tensors and the expert parameters
// are 1/t wide (H/t, fc1_out/t); T_DI, T_DO, T_O and their gradients stay whole. Collectives a
// chunk adds, each on the stream of the all-to-all it serves, in place over that all-to-all's
// tensor (per member: the chunk's dispatch tensor E*C/n x M, divided by t):
//   forward   fc2.allreduce (tensor group, FC2's partial sums) right before combine;
//             with duplicate token dropping dispatch.allgather after dispatch (T_DI whole before
//             FC1) and combine.allgather after combine (T_O whole before decode); the all-to-alls
//             then send E_l * C/n / t rows per peer.
//   backward  combine.allgather after the gradient's combine (dDO whole), fc1.allreduce (FC1's
//             partial input gradient) before dispatch, dispatch.allgather after it, and
//             redispatch.allgather after a re-dispatch (s2/s4); the re-dispatch all-to-all writes
//             the slot (its reuse edge), its all-gather completes T_DI (FC1's recompute and W1
//             gradient wait for it).
//   shared.allreduce (tensor group, B x M) after shared.fc2 (forward) and shared.fc1.dgrad
//   (backward), on comm.combine (one channel: after the layer's all-to-alls).
// Collective ids name their group where the layout has several of the kind (dispatch.tp1.c0,
// fc2.allreduce.ep3.c0, with .dp<r> in replicas r > 0 when the world spans them); expert-parallel
// ids are unchanged. With run.grad_sync, after each layer's backward on comm.grad (stage grad_sync):
// grad.experts.allreduce over the expert data-parallel group (after every fc1/fc2.wgrad) and
// grad.dense.allreduce over the non-expert one (after gate.wgrad and the shared experts' wgrads),
// of the layer's gradients, none over a group of one.
//
// Activation checkpointing (run.checkpoint, strategy none): a layer's forward frees at its decode
// everything it saved except its input T_I (and, with cac, the stash); its backward starts by
// re-running the forward (pass bwd, ids and buffers prefixed recompute.: L0.bwd.recompute.fc1.c0,
// L0.recompute.T_M; local tasks in stage recompute, the all-to-alls in redispatch / recombine),
// whose tensors and output (L{l}.recompute.out, B x M) bwd.gate.wgrad frees; bwd.decode waits
// for the re-run's decode. With cac the forward keeps what its all-to-alls received (T_DI and T_O,
// or with duplicate token dropping the 1/t shares L{l}.stash.T_DI / .T_O, allocated by the first
// dispatch / combine) and the re-run has no all-to-alls: it reads T_DI / T_O, or all-gathers the
// shares into new tensors.
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

LayerDims derive_layer_dims(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) {
  require_moe_layers(model);
  const int experts = model.num_experts;
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

  // C = floor(k*f*B/E). The relative slack absorbs the binary representation error of f (1.1 is
  // stored as 1.1000000000000000888): without it, k*f*B/E = 110 could floor to 109.
  const std::int64_t kb = checked_mul(model.top_k, run.tokens_per_gpu);
  const double raw = static_cast<double>(kb) * f / static_cast<double>(experts);
  if (!(raw < 9.0e18))
    throw InputError("capacity k*f*B/E = " + fmt(raw) + " does not fit in 64 bits");
  const auto capacity = static_cast<std::int64_t>(std::floor(raw * (1.0 + 1e-12)));
  const std::int64_t n = run.num_chunks;
  // With duplicate token dropping every chunk's slots split over the tensor-parallel ranks, as
  // TED's drop along the capacity dimension requires (a chunk they do not divide is padded).
  const bool dtd = tp > 1 && run.drop_duplicate_tokens;
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
// One logical buffer: its id on every simulated rank, in simulated_ranks() order.
using Buf = std::vector<BufferId>;

// Buffers a task allocates at its start and frees at its end (empty Bufs are skipped, so optional
// buffers can be passed unconditionally).
struct Uses {
  std::vector<Buf> alloc;
  std::vector<Buf> free;
};

bool offloads_di(MemoryStrategy s) { return s == MemoryStrategy::kS1 || s == MemoryStrategy::kS3; }
bool offloads_m(MemoryStrategy s) { return s == MemoryStrategy::kS1 || s == MemoryStrategy::kS2; }
bool redispatches(MemoryStrategy s) { return s == MemoryStrategy::kS2 || s == MemoryStrategy::kS4; }
bool recomputes(MemoryStrategy s) { return s == MemoryStrategy::kS3 || s == MemoryStrategy::kS4; }

// Rows one rank sends (its tokens' choices, to every expert) and receives (for its local experts)
// per chunk. Uniform routing pads every (source, expert) pair to C/n rows per chunk; a routing
// plan gives the routed rows, different on every rank.
struct RankLoad {
  std::vector<std::int64_t> sent, received;  // per chunk
  std::int64_t sent_total = 0;
  std::int64_t received_total = 0;
  std::int64_t received_max = 0;  // the largest chunk: what a slot buffer must hold
};

RankLoad make_load(std::vector<std::int64_t> sent, std::vector<std::int64_t> received) {
  RankLoad l;
  l.sent = std::move(sent);
  l.received = std::move(received);
  for (std::int64_t v : l.sent) l.sent_total = checked_add(l.sent_total, v);
  for (std::int64_t v : l.received) {
    l.received_total = checked_add(l.received_total, v);
    l.received_max = std::max(l.received_max, v);
  }
  return l;
}

class Builder {
 public:
  Builder(const ModelSpec& model, const RunSpec& run, const LayerDims& dims, TaskGraph& graph,
          bool single_comm_stream, const RoutingPlan* routing)
      : model_(model),
        run_(run),
        d_(dims),
        g_(graph),
        single_comm_stream_(single_comm_stream),
        layout_(dims.layout()),
        model_states_(layer_model_state_bytes(model, dims, run.optimizer, run.zero_stage)) {
    eb_ = d_.element_bytes;
    const int n = d_.num_chunks;
    for (int r : g_.simulated_ranks()) {
      if (routing == nullptr) {
        std::vector<std::int64_t> padded;
        for (int c = 0; c < n; ++c) padded.push_back(d_.rows_per_chunk(c));
        loads_.push_back(make_load(padded, padded));
        continue;
      }
      // Every replica routes as the first one does (the routing plan's ranks are EP positions).
      const int e = layout_.ep_index(r);
      std::vector<std::int64_t> sent, received;
      for (int c = 0; c < n; ++c) {
        sent.push_back(routing->sent_rows(e, c));
        received.push_back(routing->received_rows(e, c));
      }
      loads_.push_back(make_load(std::move(sent), std::move(received)));
    }
    if (routing != nullptr) {
      for (int c = 0; c < n; ++c) {
        auto m = std::make_shared<TrafficMatrix>();
        m->size = d_.ep_size;
        m->row_bytes = checked_mul(d_.d_model, eb_);
        m->rows = routing->pair_matrix(c);  // shared, not copied
        traffic_.push_back(std::move(m));
      }
    }
    if (model_.shared_experts.count > 0) {
      // A tensor-parallel rank's slice of the shared experts (derive_layer_dims: t divides it).
      shared_h_ = checked_mul(model_.shared_experts.count, model_.shared_experts.d_ffn) / d_.tp_size;
      shared_fc1_out_ = model_.activation == Activation::kSwiglu ? checked_mul(2, shared_h_) : shared_h_;
    }
    reuse_ = run_.strategy != MemoryStrategy::kNone;
    saved_.resize(run_.num_moe_layers);
    t_i_.resize(run_.num_moe_layers);
    stash_.resize(run_.num_moe_layers);
    di_slots_.resize(run_.num_moe_layers);
    m_slots_.resize(run_.num_moe_layers);
    do_slots_.resize(run_.num_moe_layers);
    fwd_offload_di_.resize(run_.num_moe_layers);
    fwd_offload_m_.resize(run_.num_moe_layers);
    fwd_di_freer_.resize(run_.num_moe_layers);
    fwd_m_freer_.resize(run_.num_moe_layers);
  }

  void build() {
    const int layers = run_.num_moe_layers;
    std::vector<Node> fwd_decode(layers);
    Node prev_output;
    d_t_i_.assign(layers, Buf{});
    // Layer l's input T_I: the step's input for layer 0 (allocated by its gate), else the output of
    // layer l-1, allocated by that layer's decode, which writes it.
    Buf next_input = buffer(0, "T_I", -1, bytes(d_.tokens, d_.d_model), MemoryCategory::kActivations);
    for (int l = 0; l < layers; ++l) {
      const Buf input = next_input;
      next_input = l + 1 < layers
                       ? buffer(l + 1, "T_I", -1, bytes(d_.tokens, d_.d_model), MemoryCategory::kActivations)
                       : Buf{};
      fwd_decode[l] = forward_layer(l, prev_output, input, next_input);
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
        if (pass == Pass::kBackward) {
          interleave(o.compute_chunks);
          break;
        }
        if (!single_comm_stream_) {
          o.second_stream = StreamClass::kCommCombine;
          for (int i = 0; i < n; ++i) o.issue.emplace_back(false, i);
          for (int i = 0; i < n; ++i) o.issue.emplace_back(true, i);
          break;
        }
        [[fallthrough]];  // one channel: the fastermoe forward (see BuildOptions)
      case OrderPolicy::kFasterMoE:
        if (reuse_) {
          // All dispatches first cannot be issued on one stream with bounded slots: FC2 of chunk i
          // waits (reuse) for the combine of chunk i - slots, and dispatch j waits for FC1 of chunk
          // j - slots, so a combine queued behind dispatch j > i + slots would close a cycle. Issue
          // dispatches as far ahead as that allows: combine m goes before dispatch m + 2*slots + 1.
          // Backward has the same shape with the gradient slots (the gradient all-to-all of g
          // waits for fc2.wgrad of g - slots, fc1.dgrad of g for the dispatch of g - slots).
          const int ahead = std::min(n, 2 * run_.slots + 1);
          for (int i = 0; i < ahead; ++i) o.issue.emplace_back(false, i);
          for (int m = 0; m < n; ++m) {
            o.issue.emplace_back(true, m);
            if (m + ahead < n) o.issue.emplace_back(false, m + ahead);
          }
          break;
        }
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

  // The stream of the shared experts' tensor-parallel all-reduce: comm.combine, which the backward
  // and the other orders' forward leave idle, or the one channel.
  StreamClass shared_stream() const {
    return single_comm_stream_ ? StreamClass::kCommDispatch : StreamClass::kCommCombine;
  }

  // Shared experts sliced over the tensor-parallel ranks produce partial sums (their output in
  // forward, their input gradient in backward, B x M) that an all-reduce completes; `partial`
  // becomes that all-reduce.
  bool shared_tp() const { return shared_h_ > 0 && d_.tp_size > 1; }
  void reduce_shared(int layer, Pass pass, Node& partial) {
    const Node ar = group_collective(layer, pass, "shared.allreduce", "tp_reduce", -1, shared_stream(),
                                     GroupKind::kTensor, CollectiveOp::kAllReduce, bytes(d_.tokens, d_.d_model));
    edge(partial, ar);
    partial = ar;
  }

  // While a checkpointed layer's forward is re-run (rerun_), its task ids and buffer names are
  // prefixed `recompute.` (L0.bwd.recompute.fc1.c0, L0.recompute.T_M) and its local tasks are in
  // stage recompute, its all-to-alls in redispatch / recombine.
  std::string id(int layer, Pass pass, const std::string& rest, int chunk = -1) const {
    std::string s = "L" + std::to_string(layer) + "." + std::string(to_string(pass)) + "." +
                    (rerun_ ? "recompute." : "") + rest;
    if (chunk >= 0) s += ".c" + std::to_string(chunk);
    return s;
  }

  // Registers `L{layer}.{name}[.c{chunk}]` on every simulated rank, of size_of(that rank's load)
  // bytes.
  template <typename SizeOf>
  Buf buffer_each(int layer, const std::string& name, int chunk, SizeOf size_of, MemoryCategory category,
                  bool resident = false) {
    std::string full = "L" + std::to_string(layer) + "." + (rerun_ ? "recompute." : "") + name;
    if (chunk >= 0) full += ".c" + std::to_string(chunk);
    Buf b;
    std::size_t slot = 0;
    for (int r : g_.simulated_ranks())
      b.push_back(g_.add_buffer(Buffer{full, r, size_of(loads_[slot++]), category, resident}));
    return b;
  }

  // The same size on every rank.
  Buf buffer(int layer, const std::string& name, int chunk, std::int64_t bytes, MemoryCategory category,
             bool resident = false) {
    return buffer_each(layer, name, chunk, [bytes](const RankLoad&) { return bytes; }, category, resident);
  }

  // The buffer ids a task on simulated rank slot `slot` lists (slot < 0: every rank, for a collective).
  static std::vector<BufferId> ids(const std::vector<Buf>& bufs, int slot) {
    std::vector<BufferId> out;
    for (const Buf& b : bufs) {
      if (b.empty()) continue;
      if (slot >= 0)
        out.push_back(b[static_cast<std::size_t>(slot)]);
      else
        out.insert(out.end(), b.begin(), b.end());
    }
    return out;
  }

  // A task on every simulated rank, its work work_of(that rank's load).
  template <typename WorkOf>
  Node local_each(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                  StreamClass stream, WorkOf work_of, const Uses& uses) {
    Node node;
    int slot = 0;
    for (int r : g_.simulated_ranks()) {
      Task t;
      t.id = id(layer, pass, rest, chunk);
      t.rank = r;
      t.stream = stream;
      t.work = work_of(loads_[static_cast<std::size_t>(slot)]);
      t.layer = layer;
      t.pass = pass;
      t.stage = rerun_ ? "recompute" : stage;
      t.chunk = chunk;
      t.allocates = ids(uses.alloc, slot);
      t.frees = ids(uses.free, slot);
      node.push_back(g_.add_task(std::move(t)));
      ++slot;
    }
    return node;
  }

  Node compute(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
               const Work& work, const Uses& uses = {}) {
    return local_each(layer, pass, rest, stage, chunk, StreamClass::kCompute, [&work](const RankLoad&) { return work; },
                      uses);
  }

  template <typename WorkOf>
  Node compute_each(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                    WorkOf work_of, const Uses& uses = {}) {
    return local_each(layer, pass, rest, stage, chunk, StreamClass::kCompute, work_of, uses);
  }

  // A copy of `cols` columns of the rows the rank received in `chunk` (an expert tensor's chunk).
  Node copy(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
            std::int64_t cols, CopyDirection direction, const Uses& uses) {
    const StreamClass stream =
        direction == CopyDirection::kDeviceToHost ? StreamClass::kCopyD2H : StreamClass::kCopyH2D;
    return local_each(
        layer, pass, rest, stage, chunk, stream,
        [&](const RankLoad& load) { return Work{CopyWork{bytes(received(load, chunk), cols), direction}}; }, uses);
  }

  static std::int64_t received(const RankLoad& load, int chunk) {
    return load.received[static_cast<std::size_t>(chunk)];
  }

  // Rows per local expert in a chunk, for the batched expert GEMMs: exact under uniform routing;
  // with a routing plan the chunk's rows are spread over the local experts (a grouped GEMM does
  // the same FLOP; rows are rounded up per expert).
  std::int64_t expert_rows(const RankLoad& load, int chunk) const {
    const std::int64_t rows = received(load, chunk);
    return (rows + d_.local_experts - 1) / d_.local_experts;
  }

  // The rank groups of DeepSpeed-TED's layout (sim/spec/parallel_layout.h) a collective runs over.
  enum class GroupKind { kExpert, kTensor, kExpertData, kDenseData };

  std::vector<int> members(GroupKind kind, int rank) const {
    switch (kind) {
      case GroupKind::kExpert:
        return layout_.expert_group(rank);
      case GroupKind::kTensor:
        return layout_.tensor_group(rank);
      case GroupKind::kExpertData:
        return layout_.expert_data_group(rank);
      case GroupKind::kDenseData:
        return layout_.dense_data_group(rank);
    }
    MOESIM_CHECK(false, "unknown group kind");
  }

  // Which group of `kind` holds `rank`: ranks with equal keys have equal members().
  std::int64_t group_key(GroupKind kind, int rank) const {
    const auto dp = static_cast<std::int64_t>(layout_.dp_index(rank));
    switch (kind) {
      case GroupKind::kExpert:
        return dp * layout_.tp + layout_.tp_index(rank);
      case GroupKind::kTensor:
        return dp * layout_.ep + layout_.ep_index(rank);
      case GroupKind::kExpertData:
        return static_cast<std::int64_t>(layout_.ep_index(rank)) * layout_.tp + layout_.tp_index(rank);
      case GroupKind::kDenseData:
        return layout_.tp_index(rank);
    }
    MOESIM_CHECK(false, "unknown group kind");
  }

  // Tells apart, in task ids, the collectives of the different groups of one kind; empty where the
  // layout has one group of the kind, so that expert-parallel ids stay `L0.fwd.dispatch.c0`. The
  // same collective has the same id whichever ranks the graph simulates.
  std::string group_suffix(GroupKind kind, int rank) const {
    const std::string tp = layout_.tp > 1 ? ".tp" + std::to_string(layout_.tp_index(rank)) : "";
    const std::string ep = layout_.ep > 1 ? ".ep" + std::to_string(layout_.ep_index(rank)) : "";
    // The first replica's collectives keep the ids of a one-replica world (gradient sync does not
    // rename the step's all-to-alls).
    const std::string dp = layout_.dp_index(rank) > 0 ? ".dp" + std::to_string(layout_.dp_index(rank)) : "";
    switch (kind) {
      case GroupKind::kExpert:
        return tp + dp;
      case GroupKind::kTensor:
        return ep + dp;
      case GroupKind::kExpertData:
        return ep + tp;
      case GroupKind::kDenseData:
        return tp;
    }
    MOESIM_CHECK(false, "unknown group kind");
  }

  // One collective task per distinct `kind` group among the simulated ranks, in the order of their
  // first simulated member; Node[s] is the task of simulated rank s's group. A task allocates and
  // frees the listed buffers of its simulated members. work_of(group id) gives its work.
  template <typename WorkOf>
  Node collective(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                  StreamClass stream, GroupKind kind, WorkOf work_of, const Uses& uses = {}) {
    const std::vector<int>& sim = g_.simulated_ranks();
    std::vector<std::vector<int>> groups;        // distinct groups, in order of first member
    std::vector<std::vector<int>> slots_of;      // their simulated members' slots
    std::unordered_map<std::int64_t, std::size_t> index;  // group_key -> position in groups
    Node node(sim.size());
    std::vector<std::size_t> group_of_slot(sim.size());
    for (std::size_t s = 0; s < sim.size(); ++s) {
      // The members are listed once per group, not once per simulated rank: with every rank of a
      // large expert-parallel group simulated that would be N^2 work per collective.
      auto [it, inserted] = index.emplace(group_key(kind, sim[s]), groups.size());
      if (inserted) {
        groups.push_back(members(kind, sim[s]));
        slots_of.emplace_back();
      }
      group_of_slot[s] = it->second;
      slots_of[it->second].push_back(static_cast<int>(s));
    }
    std::vector<TaskIndex> task_of(groups.size());
    for (std::size_t k = 0; k < groups.size(); ++k) {
      Task t;
      t.id = id(layer, pass, rest + group_suffix(kind, groups[k].front()), chunk);
      t.rank = -1;
      t.stream = stream;
      t.work = work_of(g_.add_group(groups[k]));
      t.layer = layer;
      t.pass = pass;
      t.stage = stage;
      t.chunk = chunk;
      for (int s : slots_of[k]) {
        for (BufferId b : ids(uses.alloc, s)) t.allocates.push_back(b);
        for (BufferId b : ids(uses.free, s)) t.frees.push_back(b);
      }
      task_of[k] = g_.add_task(std::move(t));
    }
    for (std::size_t s = 0; s < sim.size(); ++s) node[s] = task_of[group_of_slot[s]];
    return node;
  }

  Node all_to_all(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                  StreamClass stream, bool to_experts, const Uses& uses = {}) {
    const auto work_of = [&](GroupId group) {
      CollectiveWork work{CollectiveOp::kAllToAll, group, d_.a2a_bytes_per_peer(chunk)};
      if (!traffic_.empty()) {
        // The routed rows of this chunk: dispatch-direction collectives (the dispatch, the
        // re-dispatch, the gradient of the combine) send them from the token's rank to the
        // expert's; the others (combine, the dispatch's gradient) send them back.
        work.bytes_per_peer = 0;
        work.traffic = traffic_[static_cast<std::size_t>(chunk)];
        work.transposed = !to_experts;
      }
      return work;
    };
    const std::string rerun_stage = to_experts ? "redispatch" : "recombine";
    return collective(layer, pass, rest, rerun_ ? rerun_stage : stage, chunk, stream, GroupKind::kExpert, work_of,
                      uses);
  }

  // A collective of `op` over `kind` groups whose whole tensor is `bytes` on each member: each
  // member contributes ceil(bytes / group size) (CollectiveWork's convention).
  Node group_collective(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                        StreamClass stream, GroupKind kind, CollectiveOp op, std::int64_t bytes,
                        const Uses& uses = {}) {
    const auto work_of = [&](GroupId group) {
      const auto size = static_cast<std::int64_t>(g_.group(group).size());
      return CollectiveWork{op, group, (bytes + size - 1) / size};
    };
    return collective(layer, pass, rest, stage, chunk, stream, kind, work_of, uses);
  }

  // Tensor-parallel collectives of a chunk's dispatch tensor (rows_per_chunk x M, the whole tensor
  // on every member after it): the all-gather that follows an all-to-all with duplicate token
  // dropping, and the all-reduce that completes FC2's partial sums (FC1's input gradient in
  // backward).
  Node tp_all_gather(int layer, Pass pass, const std::string& rest, int chunk, StreamClass stream,
                     const Uses& uses = {}) {
    return group_collective(layer, pass, rest, "tp_gather", chunk, stream, GroupKind::kTensor,
                            CollectiveOp::kAllGather, bytes(d_.gathered_rows_per_chunk(chunk), d_.d_model), uses);
  }
  Node tp_all_reduce(int layer, Pass pass, const std::string& rest, int chunk, StreamClass stream) {
    return group_collective(layer, pass, rest, "tp_reduce", chunk, stream, GroupKind::kTensor,
                            CollectiveOp::kAllReduce, bytes(d_.rows_per_chunk(chunk), d_.d_model));
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

  // No edge when either end is absent (an empty Node: a task the configuration does not have).
  void edge(const Node& from, const Node& to, DepKind kind = DepKind::kData) {
    if (from.empty() || to.empty()) return;
    for (std::size_t i = 0; i < from.size(); ++i) g_.add_dependency(from[i], to[i], kind);
  }

  // Bytes of `rows` x `cols` elements.
  std::int64_t bytes(std::int64_t rows, std::int64_t cols) const { return checked_mul({rows, cols, eb_}); }

  // First and last chunk of one side (second = false / true) of a pass's collective issue order.
  static std::pair<int, int> first_last(const CommOrder& o, bool second) {
    int first = -1, last = -1;
    for (const auto& [s, c] : o.issue) {
      if (s != second) continue;
      if (first < 0) first = c;
      last = c;
    }
    return {first, last};
  }

  // The layer's forward; with rerun_, its re-run before its backward under activation
  // checkpointing (pass bwd, `output` then the re-run's own, held until the layer's backward ends).
  Node forward_layer(int l, const Node& input, const Buf& t_i, const Buf& output) {
    const Pass p = rerun_ ? Pass::kBackward : Pass::kForward;
    const MemoryStrategy strategy = run_.strategy;
    const bool checkpointed = run_.checkpoint != ActivationCheckpointing::kNone;
    const bool cac = run_.checkpoint == ActivationCheckpointing::kCommAware;
    const bool dtd = d_.drop_duplicate_tokens;
    const std::int64_t B = d_.tokens, M = d_.d_model, E = d_.num_experts, k = d_.top_k;
    // The rank's slice of the experts' hidden width (all of it without tensor parallelism).
    const std::int64_t H = d_.d_ffn_shard(), F = d_.fc1_out_shard(), El = d_.local_experts;
    const int n = d_.num_chunks;
    // Per rank (RankLoad): R = received_total rows (E*C under uniform routing), R/n per chunk
    // (received[c]), the slot size received_max, and the rows it sends, sent_total.
    const auto recv_bytes = [this](std::int64_t cols) {
      return [this, cols](const RankLoad& load) { return bytes(load.received_total, cols); };
    };
    const auto slot_bytes = [this](std::int64_t cols) {
      return [this, cols](const RankLoad& load) { return bytes(load.received_max, cols); };
    };

    // Model states and the pinned host copies of offloaded tensors: resident for the whole step.
    if (!rerun_) {
      const ModelStateBytes& ms = model_states_;
      buffer(l, "params", -1, ms.param_bytes, MemoryCategory::kModelStates, true);
      buffer(l, "grads", -1, ms.grad_bytes, MemoryCategory::kModelStates, true);
      if (ms.optimizer_bytes > 0)  // plain SGD in fp32 keeps no optimizer state
        buffer(l, "optimizer", -1, ms.optimizer_bytes, MemoryCategory::kModelStates, true);
      if (offloads_di(strategy)) buffer_each(l, "host.T_DI", -1, recv_bytes(M), MemoryCategory::kHostPinned, true);
      if (offloads_m(strategy)) buffer_each(l, "host.T_M", -1, recv_bytes(F), MemoryCategory::kHostPinned, true);
      t_i_[l] = t_i;
    }

    // Activations saved for backward (this pass's; the layer's input is the caller's). Under
    // communication-aware checkpointing what the all-to-alls received is stashed for the re-run:
    // T_DI and T_O themselves, or with duplicate token dropping the rank's 1/tp shares, which the
    // re-run all-gathers again; the re-run then sends nothing and uses the stash.
    std::vector<Buf> saved;
    std::vector<Buf> stashed;
    const bool stash_is_tensor = cac && !dtd;     // the re-run reads the forward's T_DI and T_O
    const bool from_stash = rerun_ && cac;        // this pass skips the all-to-alls
    const Buf t_o = from_stash && stash_is_tensor
                        ? stash_[l].o
                        : buffer_each(
                              l, "T_O", -1, [&](const RankLoad& load) { return bytes(load.sent_total, M); },
                              MemoryCategory::kActivations);
    if (!(from_stash && stash_is_tensor)) saved.push_back(t_o);
    if (cac && !rerun_) {
      if (stash_is_tensor) {
        stash_[l].o = t_o;
      } else {
        // The rank's 1/t share of every chunk (padded where t does not divide it); duplicate
        // token dropping runs with uniform routing only, so every rank sends what it receives.
        std::int64_t share_rows = 0;
        for (int c = 0; c < n; ++c) share_rows = checked_add(share_rows, checked_mul(E, d_.shared_chunk_capacity(c)));
        stash_[l].di = buffer(l, "stash.T_DI", -1, bytes(share_rows, M), MemoryCategory::kActivations);
        stash_[l].o = buffer(l, "stash.T_O", -1, bytes(share_rows, M), MemoryCategory::kActivations);
      }
    }
    Buf scores, topk;
    if (run_.count_routing_data) {
      scores = buffer(l, "scores", -1, bytes(B, E), MemoryCategory::kActivations);
      topk = buffer(l, "topk", -1, checked_mul({B, k, 8}), MemoryCategory::kActivations);
      saved.push_back(scores);
      saved.push_back(topk);
    }
    // Without reuse, T_DI / T_M / T_DO are full-size and kept for backward; with reuse, a pool of
    // slot buffers per tensor (`slots` for T_DI and T_DO, 1 for T_M), allocated by the first task
    // that writes each slot and kept until the layer's backward ends. The chunk at sequence
    // position q writes slot q % slots; the reuse edges below order it after the release of the
    // slot's previous chunk. T_DI's sequence continues into the backward restores. T_M is FC1's
    // output, F wide.
    Buf t_di_full, t_m_full, t_do_full;
    if (reuse_) {
      const int s = run_.slots;
      std::vector<Buf>& di = di_slots_[l];
      std::vector<Buf>& m = m_slots_[l];
      std::vector<Buf>& dout = do_slots_[l];
      for (int i = 0; i < std::min(s, 2 * n); ++i)
        di.push_back(buffer_each(l, "T_DI.slot" + std::to_string(i), -1, slot_bytes(M), MemoryCategory::kActivations));
      m.push_back(buffer_each(l, "T_M.slot0", -1, slot_bytes(F), MemoryCategory::kActivations));
      for (int i = 0; i < std::min(s, n); ++i)
        dout.push_back(buffer_each(l, "T_DO.slot" + std::to_string(i), -1, slot_bytes(M), MemoryCategory::kActivations));
      for (const std::vector<Buf>* pool : {&di, &m, &dout})
        saved.insert(saved.end(), pool->begin(), pool->end());
    } else {
      if (from_stash && stash_is_tensor) {
        t_di_full = stash_[l].di;
      } else {
        t_di_full = buffer_each(l, "T_DI", -1, recv_bytes(M), MemoryCategory::kActivations);
        saved.push_back(t_di_full);
        if (cac && !rerun_ && stash_is_tensor) stash_[l].di = t_di_full;
      }
      t_m_full = buffer_each(l, "T_M", -1, recv_bytes(F), MemoryCategory::kActivations);
      t_do_full = buffer_each(l, "T_DO", -1, recv_bytes(M), MemoryCategory::kActivations);
      saved.push_back(t_m_full);
      saved.push_back(t_do_full);
    }
    if (cac && !rerun_) stashed = {stash_[l].di, stash_[l].o};

    const Node gate =
        compute(l, p, "gate", "gate", -1, gemm(1, B, M, E), Uses{{l == 0 && !rerun_ ? t_i : Buf{}}, {}});
    if (!input.empty()) edge(input, gate);
    const std::int64_t be = checked_mul(B, E);
    const Node route = compute(l, p, "route", "route", -1,
                               elementwise(be, be + checked_mul({2, B, k}), checked_mul(4, be)),
                               Uses{{scores, topk}, {}});
    edge(gate, route);
    const Node encode = compute_each(l, p, "encode", "encode", -1, [&](const RankLoad& load) {
      return Work{elementwise(checked_mul(B, M), checked_mul(load.sent_total, M), 0)};
    });
    edge(route, encode);

    Node shared_out;
    Buf shared_out_buf;
    if (shared_h_ > 0) {
      // The shared experts' FC1 output (B x Fs) is saved for their backward, as T_M is for the
      // routed experts; their output (B x M) lives until decode adds it to the routed one.
      const Buf shared_t_m = buffer(l, "shared.T_M", -1, bytes(B, shared_fc1_out_), MemoryCategory::kActivations);
      saved.push_back(shared_t_m);
      shared_out_buf = buffer(l, "shared.out", -1, bytes(B, M), MemoryCategory::kTemporary);
      const Node fc1 =
          compute(l, p, "shared.fc1", "shared", -1, gemm(1, B, M, shared_fc1_out_), Uses{{shared_t_m}, {}});
      if (!input.empty()) edge(input, fc1);
      const Node act = compute(l, p, "shared.act", "shared", -1,
                               elementwise(checked_mul(B, shared_fc1_out_), checked_mul(B, shared_h_),
                                           checked_mul(B, shared_h_)));
      edge(fc1, act);
      shared_out = compute(l, p, "shared.fc2", "shared", -1, gemm(1, B, shared_h_, M), Uses{{shared_out_buf}, {}});
      edge(act, shared_out);
    }
    // Tensor-parallel shared experts end in an all-reduce of their partial output (a Megatron
    // MLP), on the combine stream, where it does not hold up the first dispatch; on one
    // communication channel it follows the layer's all-to-alls (added after them, below).
    if (shared_tp() && !single_comm_stream_) reduce_shared(l, p, shared_out);

    const CommOrder order = comm_order(Pass::kForward);  // a re-run issues as the forward did
    const int first_dispatch = first_last(order, false).first;
    const int first_combine = first_last(order, true).first;
    std::vector<Node> dispatch(n), combine(n), fc1s(n), fc2(n);
    // With tensor parallelism: the task after which a chunk's T_DI is whole (the all-gather that
    // follows the dispatch with duplicate token dropping, else the dispatch), the all-reduce of
    // FC2's partial sums, and the task after which the combined rows are whole.
    std::vector<Node> dispatch_done(n), fc2_reduce(n), combine_done(n);
    const std::vector<int>& chunks = order.compute_chunks;
    // Processing position of each chunk (its sequence position q in the slot pools).
    std::vector<std::size_t> pos(n);
    for (std::size_t g = 0; g < chunks.size(); ++g) pos[chunks[g]] = g;
    // The slot buffer a chunk's task allocates: the one it is the first writer of, if any.
    const auto first_write = [](const std::vector<Buf>& pool, std::size_t q) {
      return q < pool.size() ? pool[q] : Buf{};
    };
    // Collectives first in their issue order, then compute in chunk order: each stream's order is
    // what matters, and data edges are added once both ends exist.
    // Tensor-parallel collectives go right after (the all-gathers) or before (the all-reduce) the
    // all-to-all they serve, on its stream. They work in place: the all-to-all writes a rank's share
    // of the slot, the all-gather the rest.
    // A re-run from the stash has no all-to-alls: its all-gathers (duplicate token dropping) read
    // the stashed shares and allocate the tensors; without dropping the stash is the tensor.
    for (const auto& [second, c] : order.issue) {
      if (!second) {
        Buf di = reuse_ ? first_write(di_slots_[l], pos[c]) : (c == first_dispatch ? t_di_full : Buf{});
        if (!from_stash) {
          const Buf stash = c == first_dispatch && cac && !rerun_ && !stash_is_tensor ? stash_[l].di : Buf{};
          dispatch[c] = all_to_all(l, p, "dispatch", "dispatch", c, order.first_stream, true, Uses{{di, stash}, {}});
          di = Buf{};
        }
        dispatch_done[c] = dispatch[c];
        if (dtd) {
          dispatch_done[c] = tp_all_gather(l, p, "dispatch.allgather", c, order.first_stream, Uses{{di}, {}});
          edge(dispatch[c], dispatch_done[c]);
        }
      } else {
        Buf out = c == first_combine && !(from_stash && stash_is_tensor) ? t_o : Buf{};
        if (d_.tp_size > 1) fc2_reduce[c] = tp_all_reduce(l, p, "fc2.allreduce", c, order.second_stream);
        if (!from_stash) {
          const Buf stash = c == first_combine && cac && !rerun_ && !stash_is_tensor ? stash_[l].o : Buf{};
          combine[c] = all_to_all(l, p, "combine", "combine", c, order.second_stream, false, Uses{{out, stash}, {}});
          out = Buf{};
          edge(fc2_reduce[c], combine[c]);
        }
        combine_done[c] = combine[c];
        if (dtd) {
          combine_done[c] = tp_all_gather(l, p, "combine.allgather", c, order.second_stream, Uses{{out}, {}});
          edge(combine[c], combine_done[c]);
        }
      }
    }
    if (shared_tp() && single_comm_stream_) reduce_shared(l, p, shared_out);
    // The task that releases each chunk's slot (its last reader), for the reuse edges.
    std::vector<Node> di_freer(n), m_freer(n);
    fwd_offload_di_[l].assign(n, Node{});
    fwd_offload_m_[l].assign(n, Node{});
    for (std::size_t g = 0; g < chunks.size(); ++g) {
      const int c = chunks[g];
      const bool first = g == 0;
      Uses fc1_uses;
      fc1_uses.alloc = {reuse_ ? first_write(m_slots_[l], g) : (first ? t_m_full : Buf{})};
      const Node fc1 = compute_each(
          l, p, "fc1", "fc1", c, [&](const RankLoad& load) { return Work{gemm(El, expert_rows(load, c), M, F)}; },
          fc1_uses);
      const Node act = compute_each(
          l, p, "act", "act", c,
          [&](const RankLoad& load) {
            const std::int64_t r = received(load, c);
            return Work{elementwise(checked_mul(r, F), checked_mul(r, H), checked_mul(r, H))};
          });
      Uses fc2_uses;
      fc2_uses.alloc = {reuse_ ? first_write(do_slots_[l], g) : (first ? t_do_full : Buf{})};
      fc2[c] = compute_each(
          l, p, "fc2", "fc2", c, [&](const RankLoad& load) { return Work{gemm(El, expert_rows(load, c), H, M)}; },
          fc2_uses);
      fc1s[c] = fc1;
      edge(encode, dispatch[c]);
      // A re-run from the stash all-gathers (dropping) where the all-to-all would have run: after
      // encode, and after FC2 and its all-reduce.
      if (dispatch[c].empty()) edge(encode, dispatch_done[c].empty() ? fc1 : dispatch_done[c]);
      if (combine[c].empty() && !combine_done[c].empty()) {
        edge(fc2[c], combine_done[c]);
        edge(fc2_reduce[c], combine_done[c]);
      }
      edge(dispatch_done[c], fc1);
      edge(fc1, act);
      edge(act, fc2[c]);
      edge(fc2[c], d_.tp_size > 1 ? fc2_reduce[c] : combine[c]);
      di_freer[c] = fc1;
      m_freer[c] = fc2[c];
      // Offload copies (s1-s3), ordered after the slot's last compute reader: T_DI after FC1, T_M
      // after FC2. The copy is then the slot's last reader, which releases it for the next chunk.
      if (offloads_di(strategy)) {
        const Node off = copy(l, p, "offload.T_DI", "offload", c, M, CopyDirection::kDeviceToHost, Uses{});
        edge(dispatch_done[c], off);
        edge(fc1, off);
        di_freer[c] = off;
        fwd_offload_di_[l][c] = off;
      }
      if (offloads_m(strategy)) {
        const Node off = copy(l, p, "offload.T_M", "offload", c, F, CopyDirection::kDeviceToHost, Uses{});
        edge(act, off);
        edge(fc2[c], off);
        m_freer[c] = off;
        fwd_offload_m_[l][c] = off;
      }
    }
    fwd_di_freer_[l].clear();
    fwd_m_freer_[l].clear();
    for (int c : chunks) {
      fwd_di_freer_[l].push_back(di_freer[c]);
      fwd_m_freer_[l].push_back(m_freer[c]);
    }
    if (reuse_) {
      // Reuse edges: the g-th chunk processed writes the slot the (g - slots)-th one used, so the
      // task writing it waits for the last reader of that predecessor's data:
      //   dispatch.c{g} <- last reader of T_DI of g-slots (fc1, or the T_DI offload with s1/s3);
      //   fc1.c{g}      <- last reader of T_M of g-1 (fc2, or the T_M offload with s1/s2): 1 slot;
      //   fc2.c{g}      <- combine.c{g-slots}, which sends T_DO of chunk g-slots.
      const auto slots = static_cast<std::size_t>(run_.slots);
      for (std::size_t g = 0; g < chunks.size(); ++g) {
        const int c = chunks[g];
        if (g >= slots) {
          edge(di_freer[chunks[g - slots]], dispatch[c], DepKind::kReuse);
          edge(combine[chunks[g - slots]], fc2[c], DepKind::kReuse);
        }
        if (g >= 1) edge(m_freer[chunks[g - 1]], fc1s[c], DepKind::kReuse);
      }
    }
    // What the layer's backward frees with its last task: its input, and what this pass saved.
    // A checkpointed forward frees its saved tensors at its decode instead, keeping only the
    // input and the stash; the re-run's are kept, with its output, which autograd holds until the
    // layer's backward ends.
    std::vector<Buf> freed_at_decode = {shared_out_buf};
    if (!rerun_) {
      saved_[l] = {t_i};
      if (checkpointed) {
        for (const Buf& b : saved)
          if (std::find(stashed.begin(), stashed.end(), b) == stashed.end()) freed_at_decode.push_back(b);
        saved_[l].insert(saved_[l].end(), stashed.begin(), stashed.end());
      } else {
        saved_[l].insert(saved_[l].end(), saved.begin(), saved.end());
      }
    } else {
      saved_[l].insert(saved_[l].end(), saved.begin(), saved.end());
      saved_[l].push_back(output);
    }
    // Decode reads the combined rows and the scores, plus the shared experts' output it adds.
    const std::int64_t shared_read = shared_h_ > 0 ? checked_mul(B, M) : 0;
    const Node decode = compute_each(
        l, p, "decode", "decode", -1,
        [&](const RankLoad& load) {
          return Work{elementwise(checked_mul(load.sent_total, M) + checked_mul(B, k) + shared_read, checked_mul(B, M),
                                  checked_mul({2, B, k, M}))};
        },
        Uses{{output}, freed_at_decode});
    for (int c = 0; c < n; ++c) edge(combine_done[c], decode);
    edge(route, decode);
    if (!shared_out.empty()) edge(shared_out, decode);
    return decode;
  }

  Node backward_layer(int l, const Node& upstream_grad) {
    const Pass p = Pass::kBackward;
    const MemoryStrategy strategy = run_.strategy;
    const std::int64_t B = d_.tokens, M = d_.d_model, E = d_.num_experts, k = d_.top_k;
    const std::int64_t H = d_.d_ffn_shard(), F = d_.fc1_out_shard(), El = d_.local_experts;
    // Activation checkpointing: the layer's forward runs again first, from its input (and the
    // stash), re-creating the tensors its backward reads; autograd reaches it after the layer
    // above's backward, which the compute stream's order gives.
    Node rerun_decode;
    if (run_.checkpoint != ActivationCheckpointing::kNone) {
      rerun_ = true;
      const Buf out = buffer(l, "out", -1, bytes(B, M), MemoryCategory::kActivations);
      rerun_decode = forward_layer(l, Node{}, t_i_[l], out);
      rerun_ = false;
    }
    const std::int64_t bk = checked_mul(B, k);
    const auto recv_bytes = [this](std::int64_t cols) {
      return [this, cols](const RankLoad& load) { return bytes(load.received_total, cols); };
    };
    const auto slot_bytes = [this](std::int64_t cols) {
      return [this, cols](const RankLoad& load) { return bytes(load.received_max, cols); };
    };
    const auto sent_elems = [M](const RankLoad& load) { return checked_mul(load.sent_total, M); };
    const int n = d_.num_chunks;

    // Gradients (temporary). dT_O (R x M, the layer's incoming gradient, scattered to expert
    // order) and dT_I (B x M) are whole-layer tensors. The chunk gradients dDO, dM, dDI are
    // full-size without reuse (allocated by the first chunk's task, freed by the last's); with
    // reuse they live in slot buffers like the activations: `slots` for dDO and dDI, one for dM,
    // preallocated by bwd.decode when the layer's backward begins and released with the saved
    // activations by bwd.gate.wgrad. Allocating them up front (rather than by their first writer)
    // makes the peak independent of timing: it is dT_O + the pool (docs/concepts.md, Memory).
    const Buf d_t_o = buffer_each(
        l, "dT_O", -1, [&](const RankLoad& load) { return bytes(load.sent_total, M); }, MemoryCategory::kTemporary);
    const Buf d_t_i = buffer(l, "dT_I", -1, bytes(B, M), MemoryCategory::kTemporary);
    d_t_i_[l] = d_t_i;
    // The layer's incoming gradient: dT_I of the layer above, freed by its last reader here: the
    // shared experts' W2 gradient when there are shared experts, else decode.
    const Buf upstream_d = l + 1 < run_.num_moe_layers ? d_t_i_[l + 1] : Buf{};
    std::vector<Buf> grad_pool;  // with reuse: allocated by decode, freed by gate.wgrad
    Buf d_do_full, d_m_full, d_di_full;
    if (reuse_) {
      const int s = std::min(run_.slots, n);
      std::vector<Buf> do_slots, di_slots;
      for (int i = 0; i < s; ++i) {
        do_slots.push_back(buffer_each(l, "dDO.slot" + std::to_string(i), -1, slot_bytes(M), MemoryCategory::kTemporary));
        di_slots.push_back(buffer_each(l, "dDI.slot" + std::to_string(i), -1, slot_bytes(M), MemoryCategory::kTemporary));
      }
      const Buf m_slot = buffer_each(l, "dM.slot0", -1, slot_bytes(F), MemoryCategory::kTemporary);
      grad_pool.insert(grad_pool.end(), do_slots.begin(), do_slots.end());
      grad_pool.push_back(m_slot);
      grad_pool.insert(grad_pool.end(), di_slots.begin(), di_slots.end());
      // The chunk processed at position g uses slot g % s of each pool; the reuse edges below
      // order it after the slot's previous occupant.
    } else {
      d_do_full = buffer_each(l, "dDO", -1, recv_bytes(M), MemoryCategory::kTemporary);
      d_m_full = buffer_each(l, "dM", -1, recv_bytes(F), MemoryCategory::kTemporary);
      d_di_full = buffer_each(l, "dDI", -1, recv_bytes(M), MemoryCategory::kTemporary);
    }
    // swiglu's dA (FC2's input gradient, R/n x H per chunk): fc2.dgrad -> act (see the header).
    std::vector<Buf> d_a(n);
    if (F != H)
      for (int c = 0; c < n; ++c)
        d_a[c] = buffer_each(
            l, "bwd.dA", c, [&, c](const RankLoad& load) { return bytes(received(load, c), H); },
            MemoryCategory::kTemporary);

    const Node decode = compute_each(l, p, "decode", "decode", -1,
                                [&](const RankLoad& load) {
                                  return Work{elementwise(checked_mul(B, M) + sent_elems(load) + bk,
                                                          sent_elems(load) + bk, checked_mul({4, B, k, M}))};
                                },
                                Uses{[&] {
                                       std::vector<Buf> a = grad_pool;
                                       a.push_back(d_t_o);
                                       return a;
                                     }(),
                                     {shared_h_ > 0 ? Buf{} : upstream_d}});
    edge(upstream_grad, decode);
    edge(rerun_decode, decode);

    // Shared experts right after decode: they run on the compute stream while the first
    // all-to-all of the routed gradients is in flight.
    Node shared_dgrad;
    std::vector<Node> shared_wgrads;  // for the gradient all-reduce
    Buf shared_dx;
    if (shared_h_ > 0) {
      // Temporaries, as for the routed experts: the activation's input gradient shared.dM
      // (B x Fs: fc2.dgrad -> act -> fc1.wgrad / fc1.dgrad, its last reader), swiglu's dA
      // (B x Hs: fc2.dgrad -> act; relu / gelu compute over it in place), and the shared experts'
      // input gradient shared.dX (B x M: fc1.dgrad -> gate.dgrad, which adds it into dT_I).
      const Buf d_m = buffer(l, "shared.dM", -1, bytes(B, shared_fc1_out_), MemoryCategory::kTemporary);
      const Buf d_a = shared_fc1_out_ != shared_h_
                          ? buffer(l, "shared.dA", -1, bytes(B, shared_h_), MemoryCategory::kTemporary)
                          : Buf{};
      shared_dx = buffer(l, "shared.dX", -1, bytes(B, M), MemoryCategory::kTemporary);
      const Node fc2_d =
          compute(l, p, "shared.fc2.dgrad", "shared", -1, gemm(1, B, M, shared_h_), Uses{{d_m, d_a}, {}});
      edge(decode, fc2_d);
      const Node act = compute(l, p, "shared.act", "shared", -1,
                               elementwise(checked_mul(B, shared_h_) + checked_mul(B, shared_fc1_out_),
                                           checked_mul(B, shared_fc1_out_),
                                           checked_mul(B, shared_fc1_out_)),
                               Uses{{}, {d_a}});
      edge(fc2_d, act);
      // The W2 gradient reads dY and the activation's output, which the backward shared.act
      // recomputes; it is the last reader of dY (after shared.fc2.dgrad, through act).
      const Node fc2_w = compute(l, p, "shared.fc2.wgrad", "shared", -1, gemm(1, shared_h_, B, M),
                                 Uses{{}, {upstream_d}});
      edge(decode, fc2_w);
      edge(act, fc2_w);
      const Node fc1_w = compute(l, p, "shared.fc1.wgrad", "shared", -1, gemm(1, M, B, shared_fc1_out_));
      edge(act, fc1_w);
      shared_dgrad = compute(l, p, "shared.fc1.dgrad", "shared", -1, gemm(1, B, shared_fc1_out_, M),
                             Uses{{shared_dx}, {d_m}});
      edge(act, shared_dgrad);
      edge(fc1_w, shared_dgrad);  // the W1 gradient reads shared.dM, which fc1.dgrad frees
      shared_wgrads = {fc1_w, fc2_w};
    }
    // Tensor parallel, the shared experts' input gradient is a partial sum: an all-reduce
    // completes it before gate.dgrad adds it (on one channel, after the layer's all-to-alls).
    if (shared_tp() && !single_comm_stream_) reduce_shared(l, p, shared_dgrad);

    const CommOrder order = comm_order(p);
    const auto [first_g, last_g] = first_last(order, false);
    const int last_d = first_last(order, true).second;
    // T_M and T_DI are restored (prefetched, recomputed or re-dispatched) into the forward pass's
    // slot buffers, continuing its sequence: backward position g is sequence position n + g. Only
    // a slot the forward never wrote (n < slots) is allocated here, by its first restore.
    std::vector<Buf> rest_m(n), rest_di(n);
    if (reuse_) {
      for (std::size_t g = 0; g < order.compute_chunks.size(); ++g) {
        const std::size_t q = static_cast<std::size_t>(n) + g;
        if (q < di_slots_[l].size()) rest_di[order.compute_chunks[g]] = di_slots_[l][q];
        if (q < m_slots_[l].size()) rest_m[order.compute_chunks[g]] = m_slots_[l][q];
      }
    }
    std::vector<Node> grad_combine(n), grad_dispatch(n), redispatch(n);
    // With tensor parallelism (as in forward): the tasks after which dDO, a re-dispatched T_DI and
    // the token-side gradient are whole, and the all-reduce of FC1's partial input gradient.
    std::vector<Node> grad_combine_done(n), redispatch_done(n), grad_dispatch_done(n), dgrad_reduce(n);
    const bool dtd = d_.drop_duplicate_tokens;
    const auto gathered = [&](const Node& a2a, const std::string& rest, int c, StreamClass stream) {
      if (!dtd) return a2a;
      const Node ag = tp_all_gather(l, p, rest, c, stream);
      edge(a2a, ag);
      return ag;
    };
    for (const auto& [second, c] : order.issue) {
      if (!second) {
        const Buf ddo = reuse_ ? Buf{} : (c == first_g ? d_do_full : Buf{});
        const Buf dto = c == last_g ? d_t_o : Buf{};
        grad_combine[c] = all_to_all(l, p, "combine", "combine", c, order.first_stream, true, Uses{{ddo}, {dto}});
        grad_combine_done[c] = gathered(grad_combine[c], "combine.allgather", c, order.first_stream);
        if (redispatches(strategy)) {
          // s2/s4 restore T_DI by dispatching the chunk again, right after the gradient's
          // all-to-all as in the reference backward order.
          redispatch[c] = all_to_all(l, p, "redispatch", "redispatch", c, order.first_stream, true,
                                     Uses{{rest_di[c]}, {}});
          edge(decode, redispatch[c]);
          redispatch_done[c] = gathered(redispatch[c], "redispatch.allgather", c, order.first_stream);
        }
      } else {
        const Buf ddi = reuse_ ? Buf{} : (c == last_d ? d_di_full : Buf{});
        if (d_.tp_size > 1) dgrad_reduce[c] = tp_all_reduce(l, p, "fc1.allreduce", c, order.second_stream);
        grad_dispatch[c] = all_to_all(l, p, "dispatch", "dispatch", c, order.second_stream, false, Uses{{}, {ddi}});
        if (d_.tp_size > 1) edge(dgrad_reduce[c], grad_dispatch[c]);
        grad_dispatch_done[c] = gathered(grad_dispatch[c], "dispatch.allgather", c, order.second_stream);
      }
    }
    if (shared_tp() && single_comm_stream_) reduce_shared(l, p, shared_dgrad);
    const std::vector<int>& chunks = order.compute_chunks;
    // restore_di: after it T_DI is back; di_alloc: the task that writes its slot first (they differ
    // for a re-dispatch followed by an all-gather).
    std::vector<Node> fc2_ws(n), fc1_ws(n), fc2_ds(n), fc1_ds(n), restore_m(n), restore_di(n), m_alloc(n), di_alloc(n);
    for (std::size_t g = 0; g < chunks.size(); ++g) {
      const int c = chunks[g];
      const bool first = g == 0, last = g + 1 == chunks.size();
      // Restore T_M, then T_DI (the reference order), by prefetch (H2D copy of the offloaded
      // chunk), re-dispatch or recomputation.
      if (offloads_m(strategy)) {
        restore_m[c] = copy(l, p, "prefetch.T_M", "prefetch", c, F, CopyDirection::kHostToDevice, Uses{{rest_m[c]}, {}});
        edge(decode, restore_m[c]);
        edge(fwd_offload_m_[l][c], restore_m[c]);
        m_alloc[c] = restore_m[c];
      }
      if (offloads_di(strategy)) {
        restore_di[c] = copy(l, p, "prefetch.T_DI", "prefetch", c, M, CopyDirection::kHostToDevice,
                             Uses{{rest_di[c]}, {}});
        edge(decode, restore_di[c]);
        edge(fwd_offload_di_[l][c], restore_di[c]);
        di_alloc[c] = restore_di[c];
      }
      if (redispatches(strategy)) {
        restore_di[c] = redispatch_done[c];
        di_alloc[c] = redispatch[c];
      }
      if (recomputes(strategy)) {
        const Node rfc1 = compute_each(
            l, p, "recompute.fc1", "recompute", c,
            [&](const RankLoad& load) { return Work{gemm(El, expert_rows(load, c), M, F)}; },
            Uses{{rest_m[c]}, {}});
        edge(restore_di[c], rfc1);
        m_alloc[c] = rfc1;
        restore_m[c] = compute_each(
            l, p, "recompute.act", "recompute", c,
            [&](const RankLoad& load) {
              const std::int64_t r = received(load, c);
              return Work{elementwise(checked_mul(r, F), checked_mul(r, H), checked_mul(r, H))};
            });
        edge(rfc1, restore_m[c]);
      }
      // With reuse the chunk gradients live in the preallocated slots (no alloc/free here).
      const Buf ddo = reuse_ ? Buf{} : (last ? d_do_full : Buf{});
      const Buf dm_alloc = reuse_ ? Buf{} : (first ? d_m_full : Buf{});
      const Buf dm_free = reuse_ ? Buf{} : (last ? d_m_full : Buf{});
      const Buf ddi = reuse_ ? Buf{} : (first ? d_di_full : Buf{});
      const auto rows_of = [&, c](const RankLoad& load) { return expert_rows(load, c); };
      const Node fc2_d = compute_each(
          l, p, "fc2.dgrad", "fc2", c, [&](const RankLoad& load) { return Work{gemm(El, rows_of(load), M, H)}; },
          Uses{{dm_alloc, d_a[c]}, {}});
      const Node act = compute_each(
          l, p, "act", "act", c,
          [&](const RankLoad& load) {
            const std::int64_t r = received(load, c);
            return Work{elementwise(checked_mul(r, H) + checked_mul(r, F), checked_mul(r, F), checked_mul(r, F))};
          },
          Uses{{}, {d_a[c]}});
      fc2_ws[c] = compute_each(
          l, p, "fc2.wgrad", "fc2", c, [&](const RankLoad& load) { return Work{gemm(El, H, rows_of(load), M)}; },
          Uses{{}, {ddo}});
      fc1_ws[c] = compute_each(l, p, "fc1.wgrad", "fc1", c,
                               [&](const RankLoad& load) { return Work{gemm(El, M, rows_of(load), F)}; });
      const Node fc1_d = compute_each(
          l, p, "fc1.dgrad", "fc1", c, [&](const RankLoad& load) { return Work{gemm(El, rows_of(load), F, M)}; },
          Uses{{ddi}, {dm_free}});
      edge(decode, grad_combine[c]);
      edge(grad_combine_done[c], fc2_d);
      edge(fc2_d, act);
      edge(grad_combine_done[c], fc2_ws[c]);
      edge(act, fc1_ws[c]);
      edge(act, fc1_d);
      edge(fc1_d, d_.tp_size > 1 ? dgrad_reduce[c] : grad_dispatch[c]);
      fc2_ds[c] = fc2_d;
      fc1_ds[c] = fc1_d;
      if (reuse_) {
        // The activation backward and the W2 gradient read T_M; the W1 gradient reads T_DI.
        edge(restore_m[c], act);
        edge(restore_m[c], fc2_ws[c]);
        edge(restore_di[c], fc1_ws[c]);
      }
    }
    if (reuse_) {
      // Reuse edges of the restored slots, by processing position g: the restore of T_M (1 slot)
      // waits for fc2.wgrad of chunk g-1, its last reader; the restore of T_DI (`slots` slots)
      // waits for fc1.wgrad of chunk g-slots. With recomputation the T_M restore is recompute.fc1,
      // which writes the slot.
      // The restores reuse the forward pass's slots (one pool per layer and tensor), so the first
      // backward chunks continue the forward sequence: the first T_M restore waits for the release
      // of the last forward T_M chunk, and the first `slots` T_DI restores for the releases of the
      // last `slots` forward T_DI chunks (an offload still in flight keeps its slot).
      const auto slots = static_cast<std::size_t>(run_.slots);
      const std::vector<Node>& fwd_di = fwd_di_freer_[l];
      const std::vector<Node>& fwd_m = fwd_m_freer_[l];
      for (std::size_t g = 0; g < chunks.size(); ++g) {
        const int c = chunks[g];
        if (g >= 1)
          edge(fc2_ws[chunks[g - 1]], m_alloc[c], DepKind::kReuse);
        else
          edge(fwd_m.back(), m_alloc[c], DepKind::kReuse);
        if (g >= slots)
          edge(fc1_ws[chunks[g - slots]], di_alloc[c], DepKind::kReuse);
        else if (fwd_di.size() + g >= slots)
          edge(fwd_di[fwd_di.size() + g - slots], di_alloc[c], DepKind::kReuse);
        // The gradient slots: the gradient all-to-all writing dDO of g waits for fc2.wgrad of
        // g-slots (dDO's last reader); fc2.dgrad writing dM of g waits for fc1.dgrad of g-1 (one
        // slot); fc1.dgrad writing dDI of g waits for the all-to-all that sent dDI of g-slots.
        if (g >= slots) {
          edge(fc2_ws[chunks[g - slots]], grad_combine[c], DepKind::kReuse);
          edge(grad_dispatch[chunks[g - slots]], fc1_ds[c], DepKind::kReuse);
        }
        if (g >= 1) edge(fc1_ds[chunks[g - 1]], fc2_ds[c], DepKind::kReuse);
      }
    }
    const Node encode = compute_each(
        l, p, "encode", "encode", -1,
        [&](const RankLoad& load) { return Work{elementwise(sent_elems(load), checked_mul(B, M), sent_elems(load))}; },
        Uses{{d_t_i}, {}});
    for (int c = 0; c < n; ++c) edge(grad_dispatch_done[c], encode);
    const std::int64_t be = checked_mul(B, E);
    const Node route = compute(l, p, "route", "route", -1, elementwise(be + bk, be, checked_mul(4, be)));
    edge(decode, route);
    const Node gate_d = compute(l, p, "gate.dgrad", "gate", -1, gemm(1, B, E, M), Uses{{}, {shared_dx}});
    edge(route, gate_d);
    edge(encode, gate_d);
    if (!shared_dgrad.empty()) edge(shared_dgrad, gate_d);
    // The layer's last task: the saved activations are released together when the layer's
    // backward ends, and so is layer 0's dT_I, the step's input gradient (a higher layer's dT_I is
    // freed by the decode of the layer below, its last reader).
    std::vector<Buf> release = saved_[l];
    if (l == 0) release.push_back(d_t_i);
    release.insert(release.end(), grad_pool.begin(), grad_pool.end());
    const Node gate_w = compute(l, p, "gate.wgrad", "gate", -1, gemm(1, E, B, M), Uses{{}, release});
    edge(route, gate_w);
    if (run_.grad_sync) {
      // Data-parallel gradient all-reduces on comm.grad, in place over the layer's gradients (with
      // ZeRO-1 they stand for the reduce-scatter of the gradients and the all-gather of the
      // updated parameters: the same ring traffic): the experts' once their weight gradients are
      // done, over the ranks that hold the same expert shards; the gate's and shared experts'
      // after gate.wgrad, over the non-expert data-parallel group.
      const ModelStateBytes& ms = model_states_;
      if (layout_.dp > 1) {
        const Node ar = group_collective(l, p, "grad.experts.allreduce", "grad_sync", -1, StreamClass::kCommGrad,
                                         GroupKind::kExpertData, CollectiveOp::kAllReduce, ms.expert_grad_bytes());
        for (int c = 0; c < n; ++c) {
          edge(fc1_ws[c], ar);
          edge(fc2_ws[c], ar);
        }
      }
      if (layout_.ep * layout_.dp > 1) {
        const Node ar = group_collective(l, p, "grad.dense.allreduce", "grad_sync", -1, StreamClass::kCommGrad,
                                         GroupKind::kDenseData, CollectiveOp::kAllReduce, ms.dense_grad_bytes());
        edge(gate_w, ar);
        for (const Node& w : shared_wgrads) edge(w, ar);
      }
    }
    return gate_d;
  }

  const ModelSpec& model_;
  const RunSpec& run_;
  const LayerDims& d_;
  TaskGraph& g_;
  bool single_comm_stream_ = false;
  ParallelLayout layout_;
  ModelStateBytes model_states_;  // of one layer on a rank (every layer has the same)
  int eb_ = 4;
  std::vector<RankLoad> loads_;                       // per simulated rank, in simulated_ranks() order
  std::vector<std::shared_ptr<const TrafficMatrix>> traffic_;  // per chunk, with a routing plan
  std::int64_t shared_h_ = 0;
  std::int64_t shared_fc1_out_ = 0;
  std::vector<Buf> d_t_i_;  // per layer: its input gradient dT_I
  std::vector<Buf> t_i_;    // per layer: its input T_I (the checkpoint of activation checkpointing)
  // Per layer under communication-aware checkpointing: what the all-to-alls received, kept for the
  // re-run (T_DI and T_O, or their 1/tp shares with duplicate token dropping).
  struct Stash {
    Buf di, o;
  };
  std::vector<Stash> stash_;
  bool rerun_ = false;  // a checkpointed layer's forward is being re-run (see id())
  bool reuse_ = false;
  std::vector<std::vector<Buf>> saved_;             // per layer: activations freed by gate.wgrad
  std::vector<std::vector<Buf>> di_slots_;          // per layer: T_DI slot buffers (s1-s4)
  std::vector<std::vector<Buf>> m_slots_;           // per layer: the T_M slot buffer (s1-s4)
  std::vector<std::vector<Buf>> do_slots_;          // per layer: T_DO slot buffers (s1-s4)
  std::vector<std::vector<Node>> fwd_offload_di_;   // per layer, per chunk (s1/s3)
  std::vector<std::vector<Node>> fwd_offload_m_;    // per layer, per chunk (s1/s2)
  std::vector<std::vector<Node>> fwd_di_freer_;     // per layer, per forward position: releases T_DI
  std::vector<std::vector<Node>> fwd_m_freer_;      // per layer, per forward position: releases T_M
};

}  // namespace

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

TaskGraph build_moe_graph(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                          const BuildOptions& options, const RoutingPlan* routing) {
  const LayerDims dims = derive_layer_dims(model, cluster, run);
  std::optional<RoutingPlan> own_routing;
  if (routing == nullptr && !run.routing.balanced()) {
    own_routing = make_layer_routing(dims, run);
    routing = &*own_routing;
  }
  if (routing != nullptr) {
    const RoutingShape& shape = routing->shape();
    MOESIM_CHECK(shape.ranks == dims.ep_size && shape.experts == dims.num_experts &&
                     shape.chunks == dims.num_chunks && shape.capacity == dims.capacity,
                 "the routing plan was made for other layer sizes");
  }
  const GraphSize size = estimate_graph_size(dims, run, options, routing != nullptr);
  if (size.tasks > kMaxGraphTasks) {
    throw InputError("the task graph would have about " + std::to_string(size.tasks) + " tasks (" +
                     std::to_string(run.num_moe_layers) + " layers x " + std::to_string(size.simulated_ranks) +
                     " simulated ranks x " + std::to_string(dims.num_chunks) +
                     " chunks), more than the limit of " + std::to_string(kMaxGraphTasks) +
                     "; simulate fewer layers, chunks or ranks");
  }
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(size.simulated_ranks); ++r) ranks.push_back(r);
  TaskGraph graph(size.world, std::move(ranks));
  Builder(model, run, dims, graph, options.single_comm_stream, routing).build();
  return graph;
}

}  // namespace moesim
