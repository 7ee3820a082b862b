#include "runtime/exec/layer_executor.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "runtime/exec/executor_state.h"
#include "runtime/exec/gpu_compat.h"
#include "runtime/exec/lowering.h"
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

namespace {

// Sizes and types every rank shares, from the model and the layer's dims.
void init_shared(LayerExecutor::Shared& sh, const ModelSpec& model, const LayerDims& dims,
                 const ExecutorOptions& options) {
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
}

// A rank's stream and memory plans, its streams and events, and its buffers by name.
std::unique_ptr<LayerExecutor::State> plan_rank(const TaskGraph& graph, const ExecutorRank& r, bool keep_layer_io) {
  if (!graph.is_simulated(r.rank))
    throw InputError("rank " + std::to_string(r.rank) + " is not simulated by the graph (build it with every rank)");
  auto s = std::make_unique<LayerExecutor::State>();
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
    if (keep_layer_io && (tensor == "T_I" || tensor == "dT_I")) kept.push_back(static_cast<BufferId>(b));
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
  return s;
}

// Memory: the arenas and the workspace, each allocated once.
void allocate_rank_memory(LayerExecutor::State& s, const LayerExecutor::Shared& sh) {
  const LayerDims& dims = sh.d;
  s.arena = static_cast<char*>(s.dev->alloc_device(s.memory.device.arena_bytes, "the buffer arena"));
  if (s.memory.host.arena_bytes > 0)
    s.host_arena = static_cast<char*>(s.dev->alloc_pinned(s.memory.host.arena_bytes, "the pinned host arena"));
  const std::int64_t B = dims.tokens, E = dims.num_experts, k = dims.top_k, M = dims.d_model;
  std::vector<std::pair<std::function<void(char*)>, std::int64_t>> parts;  // (set the pointer, bytes)
  const auto add = [&](auto*& ptr, std::int64_t bytes) {
    parts.emplace_back([&ptr](char* at) { ptr = reinterpret_cast<std::remove_reference_t<decltype(ptr)>>(at); }, bytes);
  };
  add(s.logits, B * E * 4);
  add(s.dlogits, B * E * sh.eb);
  add(s.send, sh.dispatch_rows * M * sh.eb);
  add(s.act_ws, sh.rows_all * dims.d_ffn * sh.eb);
  add(s.y, B * M * sh.eb);
  if (sh.shared_h > 0) add(s.shared_act, B * sh.shared_h * sh.eb);
  add(s.dy, B * M * sh.eb);
  s.assign_scratch_bytes = s.dev->assign_scratch_bytes(B, dims.top_k, dims.num_experts);
  add(s.assign_scratch, s.assign_scratch_bytes);
  for (LayerRouting& lr : s.layers) {
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
  s.workspace = static_cast<char*>(s.dev->alloc_device(total, "the executor workspace"));
  s.workspace_bytes = total;
  std::int64_t off = 0;
  for (const auto& part : parts) {
    part.first(s.workspace + off);
    off += align_up(part.second, kDefaultArenaAlignment);
  }
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
  init_shared(*shared_, model, dims, options);
  int max_layer = -1;
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) max_layer = std::max(max_layer, graph.task(i).layer);
  num_layers_ = max_layer + 1;
  MOESIM_CHECK(num_layers_ >= 1, "the graph has at least one layer");
  order_ = topological_order(graph);
  for (const ExecutorRank& r : ranks) {
    std::unique_ptr<State> s = plan_rank(graph, r, options.keep_layer_io);
    s->layers.resize(static_cast<std::size_t>(num_layers_));
    allocate_rank_memory(*s, *shared_);
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

// Layer l's parameter seed.
std::uint64_t layer_seed(std::uint64_t seed, int layer) {
  return seed + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(layer);
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
      const ParamPtrs p = param_ptrs(s.buffer(l, "params"), d, sh.shared_f);
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
  const ParamPtrs p = param_ptrs(s.buffer("params"), d, sh.shared_f);
  const ParamPtrs g = param_ptrs(s.buffer("grads"), d, sh.shared_f);
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
