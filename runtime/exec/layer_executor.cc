#include "runtime/exec/layer_executor.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "runtime/exec/gpu_compat.h"
#include "runtime/exec/memory_plan.h"
#include "runtime/exec/stream_plan.h"
#include "runtime/reference/moe_reference.h"
#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"

namespace moesim::runtime {

namespace {

std::int64_t align_up(std::int64_t v, std::int64_t a) { return (v + a - 1) / a * a; }

// The op of a task id "L<layer>.<pass>.<op>[.c<chunk>]".
std::string op_of(const Task& t) {
  std::string s = t.id;
  const std::size_t first = s.find('.');
  const std::size_t second = s.find('.', first + 1);
  s = s.substr(second + 1);
  if (t.chunk >= 0) s = s.substr(0, s.rfind('.'));
  return s;
}

}  // namespace

// Sizes and types every rank shares.
struct LayerExecutor::Shared {
  LayerDims d;
  Storage type = Storage::kF32;
  GemmMath math = GemmMath::kF32;
  ActivationKind act = ActivationKind::kGelu;
  ExecutorOptions options;
  std::int64_t eb = 4;
  std::int64_t per_chunk = 0;   // C/n
  std::int64_t rows = 0;        // rows per local expert per chunk: R * C/n
  std::int64_t rows_all = 0;    // rows per chunk on either side: E_l * R * C/n = E * C/n
  std::int64_t dispatch_rows = 0;  // E * C
  std::int64_t shared_h = 0;       // Hs: the shared experts side by side (0: none)
  std::int64_t shared_f = 0;       // Fs: their FC1 width (2 Hs for swiglu)
  BlockLayout source, expert;
};

// One layer's routing on one rank, from its forward to its backward.
struct LayerRouting {
  float* probs = nullptr;
  float* topk_score = nullptr;
  float* dscores = nullptr;
  std::int32_t* topk_idx = nullptr;
  std::int32_t* topk_row = nullptr;
  std::int32_t* row_token = nullptr;
  std::int32_t* row_choice = nullptr;
  std::int32_t* tokens_per_expert = nullptr;
  std::vector<int> fwd_pos, bwd_pos;  // processing position of each chunk
};

// One local rank: its plans, streams, events, memory and the pointers into it.
struct LayerExecutor::State {
  int rank = 0;
  DeviceOps* dev = nullptr;
  StreamPlan streams;
  MemoryPlan memory;
  std::vector<int> stream_ids;  // plan stream index -> device stream
  std::vector<int> events;      // plan event index -> device event
  std::vector<int> start, end;  // per graph task: timing events (-1 when not the rank's)
  std::vector<int> plan_of;     // per graph task: index into streams.tasks, -1 when not the rank's
  int origin = -1;
  char* arena = nullptr;
  char* host_arena = nullptr;
  char* workspace = nullptr;
  std::int64_t workspace_bytes = 0;
  std::map<std::string, BufferId> buffer_ids;  // "L0.T_DI.slot0" -> id
  std::vector<LayerRouting> layers;

  // Workspace tensors. Shared by the layers: every access of layer l to them is ordered before
  // every access of layer l + 1 in forward (and after it in backward) by a path of the graph
  // (the layers are chained through decode and gate), which the executor enforces.
  float* logits = nullptr;
  char* dlogits = nullptr;
  char* send = nullptr;  // source-side dispatch tensor; receives the gradient all-to-all too
  char* act_ws = nullptr;
  char* shared_act = nullptr;  // the shared experts' activation output (B x Hs)
  char* y = nullptr;     // the top layer's output
  char* dy = nullptr;    // the top layer's incoming gradient
  char* assign_scratch = nullptr;  // the device's capacity-assignment memory (the layers' routes are chained too)
  std::int64_t assign_scratch_bytes = 0;

  static std::string full_name(int layer, const std::string& name) { return "L" + std::to_string(layer) + "." + name; }
  char* buffer(int layer, const std::string& name) const {
    const auto it = buffer_ids.find(full_name(layer, name));
    MOESIM_CHECK(it != buffer_ids.end(),
                 "the graph has no buffer " + full_name(layer, name) + " on rank " + std::to_string(rank));
    const BufferPlacement& p = memory.placement(it->second);
    return (p.host ? host_arena : arena) + p.offset;
  }
  bool has(int layer, const std::string& name) const { return buffer_ids.count(full_name(layer, name)) > 0; }
  // Buffers named "<name>.slot<i>", in slot order.
  std::vector<char*> pool(int layer, const std::string& name) const {
    std::vector<char*> out;
    for (int i = 0; has(layer, name + ".slot" + std::to_string(i)); ++i)
      out.push_back(buffer(layer, name + ".slot" + std::to_string(i)));
    return out;
  }
  int stream_of(StreamClass c) const { return stream_ids.at(static_cast<std::size_t>(streams.stream_of_class[static_cast<int>(c)])); }
};

namespace {

// One layer of one rank: what a task of that layer reads and writes.
struct RankLayer {
  RankLayer(const LayerExecutor::State& state, int layer_index, int layers)
      : st(state), r(state.layers[static_cast<std::size_t>(layer_index)]), layer(layer_index), num_layers(layers),
        dev(state.dev) {}

  const LayerExecutor::State& st;  // the rank: its device, buffers and shared workspace
  const LayerRouting& r;           // the layer's routing state on the rank
  int layer, num_layers;
  DeviceOps* dev;

  char* buffer(const std::string& name) const { return st.buffer(layer, name); }
  bool has(const std::string& name) const { return st.has(layer, name); }
  std::vector<char*> pool(const std::string& name) const { return st.pool(layer, name); }
  bool top() const { return layer + 1 == num_layers; }
  // The layer's output y: the next layer's input T_I, or the top layer's y.
  char* output() const { return top() ? st.y : st.buffer(layer + 1, "T_I"); }
  // The layer's incoming gradient dY: the next layer's dT_I, or the top layer's dY.
  char* upstream_grad() const { return top() ? st.dy : st.buffer(layer + 1, "dT_I"); }
};

// Chunk c of a per-chunk tensor `name` (rows_all rows of `width`): a slice of the full-size
// buffer without a strategy, else the slot of sequence position q.
char* chunk_ptr(const RankLayer& s, const std::string& name, int chunk, std::int64_t q, std::int64_t chunk_bytes) {
  if (s.has(name)) return s.buffer(name) + chunk * chunk_bytes;
  const std::vector<char*> pool = s.pool(name);
  MOESIM_CHECK(!pool.empty(), "the graph has neither " + name + " nor its slots");
  return pool[static_cast<std::size_t>(q % static_cast<std::int64_t>(pool.size()))];
}

}  // namespace

LayerExecutor::LayerExecutor(const TaskGraph& graph, const ModelSpec& model, const LayerDims& dims,
                             std::vector<ExecutorRank> ranks, Transport& transport, ExecutorOptions options)
    : graph_(graph), transport_(transport), shared_(std::make_unique<Shared>()) {
  if (dims.ep_size != transport.group_size())
    throw InputError("the transport's group has " + std::to_string(transport.group_size()) +
                     " ranks, the layer's expert-parallel group " + std::to_string(dims.ep_size));
  if (ranks.empty()) throw InputError("the executor needs at least one local rank");
  check_equal_chunks(dims);
  Shared& sh = *shared_;
  sh.d = dims;
  sh.type = storage_of(model.dtype);
  if (model.gemm_dtype == DType::kFp8)
    throw InputError("model '" + model.name + "': the GPU runtime has no FP8 GEMMs (FP8 with its scaling factors is not "
                     "implemented); moesim simulate predicts FP8 layers, moesim run measures fp32, tf32, bf16 and fp16");
  sh.math = math_of(model.dtype, model.gemm_dtype);
  switch (model.activation) {
    case Activation::kRelu: sh.act = ActivationKind::kRelu; break;
    case Activation::kGelu: sh.act = ActivationKind::kGelu; break;
    case Activation::kSwiglu: sh.act = ActivationKind::kSwiglu; break;
  }
  sh.options = options;
  sh.eb = storage_bytes(sh.type);
  MOESIM_CHECK(sh.eb == dims.element_bytes, "storage type and element bytes agree");
  sh.per_chunk = dims.capacity / dims.num_chunks;
  sh.rows = dims.rows_per_expert_chunk();  // every chunk: check_equal_chunks
  sh.rows_all = sh.rows * dims.local_experts;
  sh.dispatch_rows = static_cast<std::int64_t>(dims.num_experts) * dims.capacity;
  sh.shared_h = static_cast<std::int64_t>(model.shared_experts.count) * model.shared_experts.d_ffn;
  sh.shared_f = model.activation == Activation::kSwiglu ? 2 * sh.shared_h : sh.shared_h;
  if (sh.dispatch_rows > std::numeric_limits<std::int32_t>::max() ||
      dims.tokens * dims.top_k > std::numeric_limits<std::int32_t>::max())
    throw InputError("the executor indexes dispatch rows and choices with 32-bit integers: E*C = " +
                     std::to_string(sh.dispatch_rows) + " and tokens*top_k = " +
                     std::to_string(dims.tokens * dims.top_k) + " must stay below 2^31");
  const std::int64_t row_bytes = dims.d_model * sh.eb;
  sh.source = source_side_layout(dims.ep_size, dims.local_experts, sh.per_chunk, row_bytes);
  sh.expert = expert_side_layout(dims.ep_size, dims.local_experts, sh.per_chunk, row_bytes);

  int max_layer = -1;
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) max_layer = std::max(max_layer, graph.task(i).layer);
  num_layers_ = max_layer + 1;
  MOESIM_CHECK(num_layers_ >= 1, "the graph has at least one layer");
  order_ = topological_order(graph);

  for (const ExecutorRank& r : ranks) {
    if (!graph.is_simulated(r.rank))
      throw InputError("rank " + std::to_string(r.rank) + " is not simulated by the graph (build it with every rank)");
    auto s = std::make_unique<State>();
    s->rank = r.rank;
    s->dev = r.device;
    s->streams = plan_streams(graph, r.rank);
    // The tensors download() reads after the step (each layer's input and input gradient) keep
    // their bytes to the step's end: dT_I of a higher layer is freed by the lower layer's decode.
    std::vector<BufferId> kept;
    for (std::size_t b = 0; b < graph.num_buffers(); ++b) {
      const Buffer& buf = graph.buffer(static_cast<BufferId>(b));
      if (buf.rank != r.rank) continue;
      s->buffer_ids[buf.name] = static_cast<BufferId>(b);
      const std::string tensor = buf.name.substr(buf.name.find('.') + 1);
      if (options.keep_layer_io && (tensor == "T_I" || tensor == "dT_I")) kept.push_back(static_cast<BufferId>(b));
    }
    s->memory = plan_memory(graph, r.rank, kDefaultArenaAlignment, kept);
    for (std::size_t i = 0; i < s->streams.streams.size(); ++i) s->stream_ids.push_back(s->dev->create_stream());
    for (std::size_t i = 0; i < s->streams.events.size(); ++i) s->events.push_back(s->dev->create_event(false));
    s->plan_of.assign(graph.num_tasks(), -1);
    s->start.assign(graph.num_tasks(), -1);
    s->end.assign(graph.num_tasks(), -1);
    for (std::size_t p = 0; p < s->streams.tasks.size(); ++p) {
      const TaskIndex ti = s->streams.tasks[p].task;
      s->plan_of[ti] = static_cast<int>(p);
      s->start[ti] = s->dev->create_event(true);
      s->end[ti] = s->dev->create_event(true);
    }
    s->origin = s->dev->create_event(true);
    // Processing positions per layer: the order of fwd.fc1 and bwd.fc2.dgrad on the compute stream.
    s->layers.resize(static_cast<std::size_t>(num_layers_));
    for (LayerRouting& lr : s->layers) {
      lr.fwd_pos.assign(dims.num_chunks, -1);
      lr.bwd_pos.assign(dims.num_chunks, -1);
    }
    std::vector<int> fwd(num_layers_, 0), bwd(num_layers_, 0);
    for (TaskIndex ti : graph.stream_tasks(r.rank, StreamClass::kCompute)) {
      const Task& t = graph.task(ti);
      const std::string op = op_of(t);
      LayerRouting& lr = s->layers[static_cast<std::size_t>(t.layer)];
      if (t.pass == Pass::kForward && op == "fc1") lr.fwd_pos[t.chunk] = fwd[t.layer]++;
      if (t.pass == Pass::kBackward && op == "fc2.dgrad") lr.bwd_pos[t.chunk] = bwd[t.layer]++;
    }
    for (int l = 0; l < num_layers_; ++l)
      MOESIM_CHECK(fwd[l] == dims.num_chunks && bwd[l] == dims.num_chunks, "one FC1 and one FC2 dgrad per chunk");

    // Memory: the arenas and the workspace, each allocated once.
    s->arena = static_cast<char*>(s->dev->alloc_device(s->memory.device.arena_bytes, "the buffer arena"));
    if (s->memory.host.arena_bytes > 0)
      s->host_arena = static_cast<char*>(s->dev->alloc_pinned(s->memory.host.arena_bytes, "the pinned host arena"));
    const std::int64_t B = dims.tokens, E = dims.num_experts, k = dims.top_k, M = dims.d_model;
    std::vector<std::pair<std::function<void(char*)>, std::int64_t>> parts;  // (set the pointer, bytes)
    const auto add = [&](auto*& ptr, std::int64_t bytes) {
      parts.emplace_back([&ptr](char* at) { ptr = reinterpret_cast<std::remove_reference_t<decltype(ptr)>>(at); }, bytes);
    };
    add(s->logits, B * E * 4);
    add(s->dlogits, B * E * sh.eb);
    add(s->send, sh.dispatch_rows * M * sh.eb);
    add(s->act_ws, sh.rows_all * dims.d_ffn * sh.eb);
    add(s->y, B * M * sh.eb);
    if (sh.shared_h > 0) add(s->shared_act, B * sh.shared_h * sh.eb);
    add(s->dy, B * M * sh.eb);
    s->assign_scratch_bytes = s->dev->assign_scratch_bytes(B, dims.top_k, dims.num_experts);
    add(s->assign_scratch, s->assign_scratch_bytes);
    for (LayerRouting& lr : s->layers) {
      add(lr.probs, B * E * 4);
      add(lr.topk_score, B * k * 4);
      add(lr.dscores, B * k * 4);
      add(lr.topk_idx, B * k * 4);
      add(lr.topk_row, B * k * 4);
      add(lr.row_token, sh.dispatch_rows * 4);
      add(lr.row_choice, sh.dispatch_rows * 4);
      add(lr.tokens_per_expert, E * 4);
    }
    std::int64_t total = 0;
    for (const auto& part : parts) total += align_up(part.second, kDefaultArenaAlignment);
    s->workspace = static_cast<char*>(s->dev->alloc_device(total, "the executor workspace"));
    s->workspace_bytes = total;
    std::int64_t off = 0;
    for (const auto& part : parts) {
      part.first(s->workspace + off);
      off += align_up(part.second, kDefaultArenaAlignment);
    }
    states_.push_back(std::move(s));
  }
  std::sort(states_.begin(), states_.end(), [](const auto& a, const auto& b) { return a->rank < b->rank; });
}

LayerExecutor::~LayerExecutor() {
  for (const auto& s : states_) {
    s->dev->synchronize();
    s->dev->free_device(s->workspace);
    s->dev->free_device(s->arena);
    if (s->host_arena != nullptr) s->dev->free_pinned(s->host_arena);
  }
}

std::vector<int> LayerExecutor::local_ranks() const {
  std::vector<int> out;
  for (const auto& s : states_) out.push_back(s->rank);
  return out;
}

namespace {

// Parameter layout inside the graph's `params` (and `grads`) buffer: Wg (M x E), then W1
// (E_l x M x F), then W2 (E_l x H x M), then the shared experts' W1s (M x Fs) and W2s (Hs x M),
// packed, in the storage type: exactly the bytes layer_model_state_bytes counts.
struct ParamPtrs {
  char* gate;
  char* w1;
  char* w2;
  char* shared_w1;
  char* shared_w2;
};

// Layer l's parameter seed.
std::uint64_t layer_seed(std::uint64_t seed, int layer) {
  return seed + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(layer);
}

ParamPtrs param_ptrs(char* base, const LayerDims& d, std::int64_t eb, std::int64_t shared_f) {
  ParamPtrs p;
  p.gate = base;
  p.w1 = p.gate + d.d_model * d.num_experts * eb;
  p.w2 = p.w1 + d.local_experts * d.d_model * d.fc1_out * eb;
  p.shared_w1 = p.w2 + d.local_experts * d.d_ffn * d.d_model * eb;
  p.shared_w2 = p.shared_w1 + d.d_model * shared_f * eb;
  return p;
}

}  // namespace

void LayerExecutor::initialize() {
  const Shared& sh = *shared_;
  const LayerDims& d = sh.d;
  const std::uint64_t seed = sh.options.seed;
  for (const auto& sp : states_) {
    State& s = *sp;
    const int compute = s.stream_of(StreamClass::kCompute);
    auto fill = [&](void* out, std::int64_t count, std::uint64_t sd, double scale) {
      s.dev->fill(FillArgs{out, count, sd, scale, sh.type}, compute);
    };
    for (int l = 0; l < num_layers_; ++l) {
      MOESIM_CHECK(s.memory.placement(s.buffer_ids.at(State::full_name(l, "params"))).bytes >=
                       (d.d_model * d.num_experts + d.local_experts * (d.d_model * d.fc1_out + d.d_ffn * d.d_model) +
                        d.d_model * sh.shared_f + sh.shared_h * d.d_model) *
                           sh.eb,
                   "the params buffer holds the gate, the local experts and the shared experts");
      const ParamPtrs p = param_ptrs(s.buffer(l, "params"), d, sh.eb, sh.shared_f);
      // reference::random_params with the layer's seed (layer_seed: `seed` itself for layer 0):
      // the gate with it, expert e's W1 / W2 with it + 1000003 (e + 1) + 1 / + 2, scaled by
      // 1/sqrt(fan-in).
      const std::uint64_t ls = layer_seed(seed, l);
      fill(p.gate, d.d_model * d.num_experts, ls, 1.0);
      for (int el = 0; el < d.local_experts; ++el) {
        const int e = s.rank * d.local_experts + el;
        const std::uint64_t es = ls + 1000003ULL * static_cast<std::uint64_t>(e + 1);
        fill(p.w1 + el * d.d_model * d.fc1_out * sh.eb, d.d_model * d.fc1_out, es + 1,
             1.0 / std::sqrt(static_cast<double>(d.d_model)));
        fill(p.w2 + el * d.d_ffn * d.d_model * sh.eb, d.d_ffn * d.d_model, es + 2,
             1.0 / std::sqrt(static_cast<double>(d.d_ffn)));
      }
      if (sh.shared_h > 0) {  // reference::random_params: + kSharedSeedOffset + 1 / + 2
        const std::uint64_t ss = ls + reference::kSharedSeedOffset;
        fill(p.shared_w1, d.d_model * sh.shared_f, ss + 1, 1.0 / std::sqrt(static_cast<double>(d.d_model)));
        fill(p.shared_w2, sh.shared_h * d.d_model, ss + 2, 1.0 / std::sqrt(static_cast<double>(sh.shared_h)));
      }
    }
    // Inputs per rank: layer 0's x with seed + 7919 (r + 1), the top layer's dY with
    // seed + 104729 (r + 1); the other layers' inputs and gradients are the neighbours' outputs.
    fill(s.buffer(0, "T_I"), d.tokens * d.d_model, seed + 7919ULL * static_cast<std::uint64_t>(s.rank + 1), 1.0);
    fill(s.dy, d.tokens * d.d_model, seed + 104729ULL * static_cast<std::uint64_t>(s.rank + 1), 1.0);
  }
  for (const auto& s : states_) s->dev->synchronize();
}

namespace {

// What one task does on one rank, given the rank's state (local tasks) or as a collective.
class Lowering {
 public:
  explicit Lowering(const LayerExecutor::Shared& sh)
      : d_(sh.d), type_(sh.type), math_(sh.math), act_(sh.act), normalize_(sh.options.normalize_scores), eb_(sh.eb),
        rows_(sh.rows), rows_all_(sh.rows_all), dispatch_rows_(sh.dispatch_rows), shared_h_(sh.shared_h),
        shared_f_(sh.shared_f), source_(sh.source), expert_(sh.expert) {}

  // Expert-side chunk buffers; q is the sequence position of the access.
  char* t_di(const RankLayer& s, int c, bool backward) const {
    const std::int64_t q = backward ? d_.num_chunks + s.r.bwd_pos[c] : s.r.fwd_pos[c];
    return chunk_ptr(s, "T_DI", c, q, rows_all_ * d_.d_model * eb_);
  }
  // FC1's output, F wide.
  char* t_m(const RankLayer& s, int c, bool backward) const {
    const std::int64_t q = backward ? d_.num_chunks + s.r.bwd_pos[c] : s.r.fwd_pos[c];
    return chunk_ptr(s, "T_M", c, q, rows_all_ * d_.fc1_out * eb_);
  }
  // FC2's input gradient dA (H wide): swiglu's own per-chunk buffer, else dM, which the
  // activation's backward then overwrites in place with its F = H wide input gradient.
  char* d_a(const RankLayer& s, int c) const {
    const std::string own = "bwd.dA.c" + std::to_string(c);
    if (s.has(own)) return s.buffer(own);
    // In place only where dA and the activation's input gradient have the same width.
    MOESIM_CHECK(act_ != ActivationKind::kSwiglu, "a swiglu graph has its bwd.dA buffers");
    return grad(s, "dM", c, d_.fc1_out);
  }
  // The shared experts' dA (B x Hs): swiglu's own buffer, else shared.dM (computed over in place).
  char* shared_d_a(const RankLayer& s) const {
    if (s.has("shared.dA")) return s.buffer("shared.dA");
    MOESIM_CHECK(act_ != ActivationKind::kSwiglu, "a swiglu graph with shared experts has their shared.dA buffer");
    return s.buffer("shared.dM");
  }
  char* t_do(const RankLayer& s, int c) const {
    return chunk_ptr(s, "T_DO", c, s.r.fwd_pos[c], rows_all_ * d_.d_model * eb_);
  }
  char* grad(const RankLayer& s, const std::string& name, int c, std::int64_t width) const {
    return chunk_ptr(s, name, c, s.r.bwd_pos[c], rows_all_ * width * eb_);
  }
  // Chunk c of a source-side tensor in the chunk-major layout.
  char* source_chunk(char* base, int c) const { return base + c * rows_all_ * d_.d_model * eb_; }

  // op(A) m x k times op(B) k x n, per local expert.
  GemmArgs expert_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                       std::int64_t lda, std::int64_t sa, const void* b, std::int64_t ldb, std::int64_t sb, void* c,
                       std::int64_t ldc, std::int64_t sc, bool accumulate) const {
    GemmArgs g;
    g.trans_a = ta;
    g.trans_b = tb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.batch = d_.local_experts;
    g.a = a;
    g.lda = lda;
    g.stride_a = sa;
    g.b = b;
    g.ldb = ldb;
    g.stride_b = sb;
    g.c = c;
    g.ldc = ldc;
    g.stride_c = sc;
    g.ab_type = type_;
    g.c_type = type_;
    g.math = math_;
    g.accumulate = accumulate;
    return g;
  }

  // One GEMM (the gate's).
  GemmArgs dense_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                      std::int64_t lda, const void* b, std::int64_t ldb, void* c, std::int64_t ldc,
                      bool accumulate) const {
    GemmArgs g = expert_gemm(ta, tb, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, accumulate);
    g.batch = 1;
    return g;
  }

  void fc1(const RankLayer& s, int c, bool backward, int stream) const {
    const ParamPtrs p = param_ptrs(s.buffer("params"), d_, eb_, shared_f_);
    const std::int64_t M = d_.d_model, F = d_.fc1_out;
    s.dev->gemm(expert_gemm(false, false, rows_, F, M, t_di(s, c, backward), M, rows_ * M, p.w1, F, M * F,
                            t_m(s, c, backward), F, rows_ * F, false),
                stream);
  }

  void encode_rows(const RankLayer& s, std::int64_t begin, std::int64_t end, int stream) const {
    s.dev->encode(EncodeArgs{s.buffer("T_I"), s.r.row_token, d_.d_model, begin, end, s.st.send, type_}, stream);
  }

  void local(const RankLayer& s, const Task& t, const std::string& op, int stream) const {
    const std::int64_t B = d_.tokens, M = d_.d_model, H = d_.d_ffn, F = d_.fc1_out;
    const int E = d_.num_experts, k = d_.top_k, c = t.chunk;
    const bool bwd = t.pass == Pass::kBackward;
    const ParamPtrs p = param_ptrs(s.buffer("params"), d_, eb_, shared_f_);
    if (!bwd) {
      if (op == "gate") {
        GemmArgs g = dense_gemm(false, false, B, E, M, s.buffer("T_I"), M, p.gate, E, s.st.logits, E, false);
        g.c_type = Storage::kF32;  // routing decisions from fp32 logits
        s.dev->gemm(g, stream);
      } else if (op == "route") {
        s.dev->route(RouteArgs{s.st.logits, B, E, k, normalize_, s.r.probs, s.r.topk_idx, s.r.topk_score}, stream);
        s.dev->assign(AssignArgs{s.r.topk_idx, B, E, k, d_.capacity, d_.num_chunks, s.r.topk_row, s.r.row_token,
                                 s.r.row_choice, s.r.tokens_per_expert, s.st.assign_scratch, s.st.assign_scratch_bytes},
                      stream);
      } else if (op == "encode") {
        encode_rows(s, 0, dispatch_rows_, stream);
      } else if (op == "fc1") {
        fc1(s, c, false, stream);
      } else if (op == "act") {
        s.dev->activation(ActivationArgs{act_, rows_all_, H, t_m(s, c, false), s.st.act_ws, type_}, stream);
      } else if (op == "fc2") {
        s.dev->gemm(expert_gemm(false, false, rows_, M, H, s.st.act_ws, H, rows_ * H, p.w2, M, H * M, t_do(s, c), M,
                                rows_ * M, false),
                    stream);
      } else if (op == "offload.T_DI") {
        s.dev->copy(s.buffer("host.T_DI") + c * rows_all_ * M * eb_, t_di(s, c, false), rows_all_ * M * eb_, stream);
      } else if (op == "offload.T_M") {
        s.dev->copy(s.buffer("host.T_M") + c * rows_all_ * F * eb_, t_m(s, c, false), rows_all_ * F * eb_, stream);
      } else if (op == "decode") {
        s.dev->decode(DecodeArgs{s.buffer("T_O"), s.r.topk_row, s.r.topk_score, B, k, M, s.output(), type_}, stream);
        if (shared_h_ > 0) s.dev->add(AddArgs{s.output(), s.buffer("shared.out"), B * M, type_}, stream);
      } else if (op == "shared.fc1") {
        s.dev->gemm(dense_gemm(false, false, B, shared_f_, M, s.buffer("T_I"), M, p.shared_w1, shared_f_,
                               s.buffer("shared.T_M"), shared_f_, false),
                    stream);
      } else if (op == "shared.act") {
        s.dev->activation(ActivationArgs{act_, B, shared_h_, s.buffer("shared.T_M"), s.st.shared_act, type_}, stream);
      } else if (op == "shared.fc2") {
        s.dev->gemm(dense_gemm(false, false, B, M, shared_h_, s.st.shared_act, shared_h_, p.shared_w2, M,
                               s.buffer("shared.out"), M, false),
                    stream);
      } else {
        unsupported(t);
      }
      return;
    }
    const bool first = s.r.bwd_pos[c < 0 ? 0 : c] == 0;
    const ParamPtrs g = param_ptrs(s.buffer("grads"), d_, eb_, shared_f_);
    if (op == "decode") {
      s.dev->decode_backward(DecodeBackwardArgs{s.upstream_grad(), s.buffer("T_O"), s.r.topk_row, s.r.topk_score, s.r.row_token,
                                                s.r.row_choice, B, k, dispatch_rows_, M, s.buffer("dT_O"), s.r.dscores,
                                                type_},
                             stream);
    } else if (op == "prefetch.T_M") {
      s.dev->copy(t_m(s, c, true), s.buffer("host.T_M") + c * rows_all_ * F * eb_, rows_all_ * F * eb_, stream);
    } else if (op == "prefetch.T_DI") {
      s.dev->copy(t_di(s, c, true), s.buffer("host.T_DI") + c * rows_all_ * M * eb_, rows_all_ * M * eb_, stream);
    } else if (op == "recompute.fc1") {
      fc1(s, c, true, stream);
    } else if (op == "recompute.act") {
      // T_M holds FC1's output h, which recompute.fc1 has restored: nothing left to compute.
    } else if (op == "fc2.dgrad") {
      s.dev->gemm(expert_gemm(false, true, rows_, H, M, grad(s, "dDO", c, M), M, rows_ * M, p.w2, M, H * M,
                              d_a(s, c), H, rows_ * H, false),
                  stream);
    } else if (op == "act") {
      s.dev->activation_backward(
          ActivationBackwardArgs{act_, rows_all_, H, t_m(s, c, true), d_a(s, c), grad(s, "dM", c, F), s.st.act_ws, type_},
          stream);
    } else if (op == "fc2.wgrad") {
      s.dev->gemm(expert_gemm(true, false, H, M, rows_, s.st.act_ws, H, rows_ * H, grad(s, "dDO", c, M), M, rows_ * M,
                              g.w2, M, H * M, !first),
                  stream);
    } else if (op == "fc1.wgrad") {
      s.dev->gemm(expert_gemm(true, false, M, F, rows_, t_di(s, c, true), M, rows_ * M, grad(s, "dM", c, F), F,
                              rows_ * F, g.w1, F, M * F, !first),
                  stream);
    } else if (op == "fc1.dgrad") {
      s.dev->gemm(expert_gemm(false, true, rows_, M, F, grad(s, "dM", c, F), F, rows_ * F, p.w1, F, M * F,
                              grad(s, "dDI", c, M), M, rows_ * M, false),
                  stream);
    } else if (op == "encode") {
      s.dev->encode_backward(EncodeBackwardArgs{s.st.send, s.r.topk_row, B, k, M, s.buffer("dT_I"), type_}, stream);
    } else if (op == "route") {
      s.dev->route_backward(
          RouteBackwardArgs{s.r.probs, s.r.topk_idx, s.r.topk_score, s.r.dscores, B, E, k, normalize_, s.st.dlogits, type_}, stream);
    } else if (op == "gate.dgrad") {
      // Accumulates: dX = encode's backward + the router's (+ the shared experts').
      s.dev->gemm(dense_gemm(false, true, B, M, E, s.st.dlogits, E, p.gate, E, s.buffer("dT_I"), M, true), stream);
      if (shared_h_ > 0) s.dev->add(AddArgs{s.buffer("dT_I"), s.buffer("shared.dX"), B * M, type_}, stream);
    } else if (op == "shared.fc2.dgrad") {
      s.dev->gemm(dense_gemm(false, true, B, shared_h_, M, s.upstream_grad(), M, p.shared_w2, M, shared_d_a(s),
                             shared_h_, false),
                  stream);
    } else if (op == "shared.act") {
      s.dev->activation_backward(ActivationBackwardArgs{act_, B, shared_h_, s.buffer("shared.T_M"), shared_d_a(s),
                                                        s.buffer("shared.dM"), s.st.shared_act, type_},
                                 stream);
    } else if (op == "shared.fc2.wgrad") {
      s.dev->gemm(dense_gemm(true, false, shared_h_, M, B, s.st.shared_act, shared_h_, s.upstream_grad(), M,
                             g.shared_w2, M, false),
                  stream);
    } else if (op == "shared.fc1.wgrad") {
      s.dev->gemm(dense_gemm(true, false, M, shared_f_, B, s.buffer("T_I"), M, s.buffer("shared.dM"), shared_f_,
                             g.shared_w1, shared_f_, false),
                  stream);
    } else if (op == "shared.fc1.dgrad") {
      s.dev->gemm(dense_gemm(false, true, B, M, shared_f_, s.buffer("shared.dM"), shared_f_, p.shared_w1, shared_f_,
                             s.buffer("shared.dX"), M, false),
                  stream);
    } else if (op == "gate.wgrad") {
      s.dev->gemm(dense_gemm(true, false, M, E, B, s.buffer("T_I"), M, s.st.dlogits, E, g.gate, E, false), stream);
    } else {
      unsupported(t);
    }
  }

  // The all-to-all of a collective task, for every local member.
  void collective(const std::vector<RankLayer>& members, const Task& t, const std::string& op,
                  const std::vector<int>& streams, Transport& transport) const {
    const bool bwd = t.pass == Pass::kBackward;
    const int c = t.chunk;
    std::vector<AllToAllMember> parts;
    int channel = t.stream == StreamClass::kCommCombine ? 1 : 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const RankLayer& s = members[i];
      AllToAllMember m;
      m.rank = s.st.rank;
      m.device = s.dev;
      m.stream = streams[i];
      const bool to_experts = (!bwd && op == "dispatch") || (bwd && (op == "combine" || op == "redispatch"));
      m.send_layout = to_experts ? source_ : expert_;
      m.recv_layout = to_experts ? expert_ : source_;
      if (!bwd && op == "dispatch") {
        m.send = source_chunk(s.st.send, c);
        m.recv = t_di(s, c, false);
      } else if (!bwd && op == "combine") {
        m.send = t_do(s, c);
        m.recv = source_chunk(s.buffer("T_O"), c);
      } else if (bwd && op == "combine") {
        m.send = source_chunk(s.buffer("dT_O"), c);
        m.recv = grad(s, "dDO", c, d_.d_model);
      } else if (bwd && op == "redispatch") {
        // Re-encode the chunk from T_I (the routing is kept), then send it again.
        encode_rows(s, c * rows_all_, (c + 1) * rows_all_, streams[i]);
        m.send = source_chunk(s.st.send, c);
        m.recv = t_di(s, c, true);
      } else if (bwd && op == "dispatch") {
        m.send = grad(s, "dDI", c, d_.d_model);
        m.recv = source_chunk(s.st.send, c);  // the source-side gradient dD, over the spent dispatch tensor
      } else {
        unsupported(t);
      }
      parts.push_back(m);
    }
    transport.all_to_all(parts, channel);
  }

 private:
  [[noreturn]] static void unsupported(const Task& t) {
    throw InputError("the GPU executor has no lowering for task '" + t.id + "'");
  }

  const LayerDims& d_;
  Storage type_;
  GemmMath math_;
  ActivationKind act_;
  bool normalize_;
  std::int64_t eb_, rows_, rows_all_, dispatch_rows_, shared_h_, shared_f_;
  BlockLayout source_, expert_;
};

}  // namespace

void LayerExecutor::scramble(std::uint64_t seed) {
  const Shared& sh = *shared_;
  for (const auto& sp : states_) {
    State& s = *sp;
    const int compute = s.stream_of(StreamClass::kCompute);
    const auto noise = [&](void* at, std::int64_t bytes, Storage type) {
      s.dev->fill(FillArgs{at, bytes / storage_bytes(type), seed++, 4.0, type}, compute);
    };
    for (const BufferPlacement& p : s.memory.placements) {
      const Buffer& b = graph_.buffer(p.buffer);
      if (b.resident || p.host || b.name == State::full_name(0, "T_I")) continue;
      noise(s.arena + p.offset, p.bytes, sh.type);
    }
    const std::int64_t B = sh.d.tokens, E = sh.d.num_experts, M = sh.d.d_model;
    noise(s.logits, B * E * 4, Storage::kF32);
    noise(s.dlogits, B * E * sh.eb, sh.type);
    noise(s.send, sh.dispatch_rows * M * sh.eb, sh.type);
    noise(s.act_ws, sh.rows_all * sh.d.d_ffn * sh.eb, sh.type);
    noise(s.y, B * M * sh.eb, sh.type);
    if (s.shared_act != nullptr) noise(s.shared_act, B * sh.shared_h * sh.eb, sh.type);
  }
  for (const auto& s : states_) s->dev->synchronize();
}

Trace LayerExecutor::run_step() {
  const Shared& sh = *shared_;
  const Lowering low(sh);
  for (const auto& s : states_) {
    s->dev->record(s->origin, s->stream_ids[0]);
    for (std::size_t i = 1; i < s->stream_ids.size(); ++i) s->dev->wait(s->stream_ids[i], s->origin);
  }
  std::vector<State*> members;
  std::vector<int> member_streams;
  for (TaskIndex ti : order_) {
    members.clear();
    member_streams.clear();
    for (const auto& s : states_)
      if (s->plan_of[ti] >= 0) members.push_back(s.get());
    if (members.empty()) continue;
    const Task& t = graph_.task(ti);
    const std::string op = op_of(t);
    for (State* s : members) {
      const PlannedTask& pt = s->streams.tasks[static_cast<std::size_t>(s->plan_of[ti])];
      const int stream = s->stream_ids[static_cast<std::size_t>(pt.stream)];
      for (int w : pt.waits) s->dev->wait(stream, s->events[static_cast<std::size_t>(w)]);
      s->dev->record(s->start[ti], stream);
      member_streams.push_back(stream);
    }
    std::vector<RankLayer> views;
    for (State* s : members) views.emplace_back(*s, t.layer, num_layers_);
    if (t.is_collective())
      low.collective(views, t, op, member_streams, transport_);
    else
      low.local(views[0], t, op, member_streams[0]);
    for (std::size_t i = 0; i < members.size(); ++i) {
      State* s = members[i];
      const PlannedTask& pt = s->streams.tasks[static_cast<std::size_t>(s->plan_of[ti])];
      s->dev->record(s->end[ti], member_streams[i]);
      if (pt.records >= 0) s->dev->record(s->events[static_cast<std::size_t>(pt.records)], member_streams[i]);
    }
  }
  std::vector<DeviceOps*> devices;
  for (const auto& s : states_)
    if (std::find(devices.begin(), devices.end(), s->dev) == devices.end()) devices.push_back(s->dev);
  transport_.wait_for(devices);

  // Times from each rank's origin; a collective's record spans its local members (latest start,
  // latest end: it begins when the last member arrives).
  Trace trace;
  trace.records.assign(graph_.num_tasks(), TaskRecord{});
  const auto ns = [](float ms) { return static_cast<TimeNs>(std::llround(static_cast<double>(ms) * 1e6)); };
  for (TaskIndex ti : order_) {
    TaskRecord& r = trace.records[ti];
    for (const auto& s : states_) {
      if (s->plan_of[ti] < 0) continue;
      r.start_ns = std::max(r.start_ns, ns(s->dev->elapsed_ms(s->origin, s->start[ti])));
      r.end_ns = std::max(r.end_ns, ns(s->dev->elapsed_ms(s->origin, s->end[ti])));
    }
    if (r.start_ns < 0) continue;
    TimeNs ready = 0;
    for (TaskIndex p : graph_.predecessors(ti)) ready = std::max(ready, trace.records[p].end_ns);
    r.ready_ns = std::min(ready, r.start_ns);
    r.end_ns = std::max(r.end_ns, r.start_ns);
  }
  return trace;
}

RankValues LayerExecutor::download(int rank, int layer) const {
  const Shared& sh = *shared_;
  const LayerDims& d = sh.d;
  const auto it = std::find_if(states_.begin(), states_.end(), [&](const auto& s) { return s->rank == rank; });
  if (it == states_.end()) throw InputError("rank " + std::to_string(rank) + " is not run by this executor");
  if (layer < 0 || layer >= num_layers_)
    throw InputError("layer " + std::to_string(layer) + " is not in the graph (" + std::to_string(num_layers_) +
                     " layer(s))");
  const RankLayer s(**it, layer, num_layers_);
  s.dev->synchronize();
  const auto get = [&](const void* src, std::int64_t count) {
    std::vector<unsigned char> raw(static_cast<std::size_t>(count * sh.eb));
    s.dev->download(raw.data(), src, count * sh.eb);
    std::vector<float> out(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) out[i] = storage_to_float(raw.data(), sh.type, i);
    return out;
  };
  const auto get_int = [&](const std::int32_t* src, std::int64_t count) {
    std::vector<std::int32_t> out(static_cast<std::size_t>(count));
    s.dev->download(out.data(), src, count * 4);
    return out;
  };
  const ParamPtrs p = param_ptrs(s.buffer("params"), d, sh.eb, sh.shared_f);
  const ParamPtrs g = param_ptrs(s.buffer("grads"), d, sh.eb, sh.shared_f);
  const std::int64_t BM = d.tokens * d.d_model, ME = d.d_model * d.num_experts;
  const std::int64_t w1 = d.local_experts * d.d_model * d.fc1_out, w2 = d.local_experts * d.d_ffn * d.d_model;
  RankValues v;
  if (sh.options.keep_layer_io) {
    v.x = get(s.buffer("T_I"), BM);
    v.dy = get(s.upstream_grad(), BM);
    v.y = get(s.output(), BM);
    v.dx = get(s.buffer("dT_I"), BM);
  }
  v.gate = get(p.gate, ME);
  v.w1 = get(p.w1, w1);
  v.w2 = get(p.w2, w2);
  v.dgate = get(g.gate, ME);
  v.dw1 = get(g.w1, w1);
  v.dw2 = get(g.w2, w2);
  if (sh.shared_h > 0) {
    const std::int64_t s1 = d.d_model * sh.shared_f, s2 = sh.shared_h * d.d_model;
    v.shared_w1 = get(p.shared_w1, s1);
    v.shared_w2 = get(p.shared_w2, s2);
    v.dshared_w1 = get(g.shared_w1, s1);
    v.dshared_w2 = get(g.shared_w2, s2);
  }
  v.topk_idx = get_int(s.r.topk_idx, d.tokens * d.top_k);
  v.topk_row = get_int(s.r.topk_row, d.tokens * d.top_k);
  return v;
}

RankMemoryUse LayerExecutor::memory(int rank) const {
  for (const auto& s : states_) {
    if (s->rank != rank) continue;
    RankMemoryUse m;
    m.arena_bytes = s->memory.device.arena_bytes;
    m.host_arena_bytes = s->memory.host.arena_bytes;
    m.workspace_bytes = s->workspace_bytes;
    m.library_bytes = s->dev->library_workspace_bytes();
    return m;
  }
  throw InputError("rank " + std::to_string(rank) + " is not run by this executor");
}

}  // namespace moesim::runtime
