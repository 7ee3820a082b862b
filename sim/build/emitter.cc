#include "sim/build/emitter.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "sim/core/checked_math.h"

namespace moesim {

namespace {

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

// The buffer ids a task on simulated rank slot `slot` lists (slot < 0: every rank, for a collective).
std::vector<BufferId> ids(const std::vector<Buf>& bufs, int slot) {
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

}  // namespace

Emitter::Emitter(TaskGraph& graph, const LayerDims& dims, const RoutingPlan* routing)
    : g_(graph), d_(dims), groups_(dims.layout()) {
  const int n = d_.num_chunks;
  for (int r : g_.simulated_ranks()) {
    if (routing == nullptr) {
      std::vector<std::int64_t> padded;
      for (int c = 0; c < n; ++c) padded.push_back(d_.rows_per_chunk(c));
      loads_.push_back(make_load(padded, padded));
      continue;
    }
    // Every replica routes as the first one does (the routing plan's ranks are EP positions).
    const int e = groups_.layout().ep_index(r);
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
      m->row_bytes = checked_mul(d_.d_model, d_.element_bytes);
      m->rows = routing->pair_matrix(c);  // shared, not copied
      traffic_.push_back(std::move(m));
    }
  }
}

std::string Emitter::task_id(int layer, Pass pass, const std::string& rest, int chunk) const {
  std::string s = "L" + std::to_string(layer) + "." + std::string(to_string(pass)) + "." +
                  (rerun_ ? "recompute." : "") + rest;
  if (chunk >= 0) s += ".c" + std::to_string(chunk);
  return s;
}

std::string Emitter::buffer_name(int layer, const std::string& name, int chunk) const {
  std::string s = "L" + std::to_string(layer) + "." + (rerun_ ? "recompute." : "") + name;
  if (chunk >= 0) s += ".c" + std::to_string(chunk);
  return s;
}

Buf Emitter::buffer_each(int layer, const std::string& name, int chunk, const SizeOf& size_of,
                         MemoryCategory category, bool resident) {
  const std::string full = buffer_name(layer, name, chunk);
  Buf b;
  std::size_t slot = 0;
  for (int r : g_.simulated_ranks())
    b.push_back(g_.add_buffer(Buffer{full, r, size_of(loads_[slot++]), category, resident}));
  return b;
}

Buf Emitter::buffer(int layer, const std::string& name, int chunk, std::int64_t bytes, MemoryCategory category,
                    bool resident) {
  return buffer_each(layer, name, chunk, [bytes](const RankLoad&) { return bytes; }, category, resident);
}

SlotPool Emitter::slot_pool(int layer, const std::string& tensor, int count, int distance, const SizeOf& size_of,
                            MemoryCategory category) {
  std::vector<Buf> slots;
  for (int i = 0; i < count; ++i)
    slots.push_back(buffer_each(layer, tensor + ".slot" + std::to_string(i), -1, size_of, category));
  return SlotPool(std::move(slots), distance);
}

Node Emitter::local_each(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                         StreamClass stream, const WorkOf& work_of, const Uses& uses, Op kernel) {
  Node node;
  int slot = 0;
  for (int r : g_.simulated_ranks()) {
    Task t;
    t.id = task_id(layer, pass, rest, chunk);
    t.rank = r;
    t.stream = stream;
    t.work = work_of(loads_[static_cast<std::size_t>(slot)]);
    t.op = op_for(t.work, kernel);
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

Node Emitter::compute(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                      const Work& work, const Uses& uses, Op kernel) {
  return local_each(layer, pass, rest, stage, chunk, StreamClass::kCompute, [&work](const RankLoad&) { return work; },
                    uses, kernel);
}

Node Emitter::compute_each(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                           const WorkOf& work_of, const Uses& uses, Op kernel) {
  return local_each(layer, pass, rest, stage, chunk, StreamClass::kCompute, work_of, uses, kernel);
}

Node Emitter::copy(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                   std::int64_t cols, CopyDirection direction, const Uses& uses) {
  const StreamClass stream =
      direction == CopyDirection::kDeviceToHost ? StreamClass::kCopyD2H : StreamClass::kCopyH2D;
  return local_each(
      layer, pass, rest, stage, chunk, stream,
      [&](const RankLoad& load) { return Work{CopyWork{bytes(load.received_in(chunk), cols), direction}}; }, uses);
}

Node Emitter::collective(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                         StreamClass stream, GroupKind kind, const CollectiveWorkOf& work_of, const Uses& uses) {
  const std::vector<int>& sim = g_.simulated_ranks();
  std::vector<std::vector<int>> groups;                 // distinct groups, in order of first member
  std::vector<std::vector<int>> slots_of;               // their simulated members' slots
  std::unordered_map<std::int64_t, std::size_t> index;  // group key -> position in groups
  std::vector<std::size_t> group_of_slot(sim.size());
  for (std::size_t s = 0; s < sim.size(); ++s) {
    // The members are listed once per group, not once per simulated rank: with every rank of a
    // large expert-parallel group simulated that would be N^2 work per collective.
    auto [it, inserted] = index.emplace(groups_.key(kind, sim[s]), groups.size());
    if (inserted) {
      groups.push_back(groups_.members(kind, sim[s]));
      slots_of.emplace_back();
    }
    group_of_slot[s] = it->second;
    slots_of[it->second].push_back(static_cast<int>(s));
  }
  std::vector<TaskIndex> task_of(groups.size());
  for (std::size_t k = 0; k < groups.size(); ++k) {
    Task t;
    t.id = task_id(layer, pass, rest + groups_.id_suffix(kind, groups[k].front()), chunk);
    t.rank = -1;
    t.stream = stream;
    t.work = work_of(g_.add_group(groups[k]));
    t.op = op_for(t.work);
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
  Node node(sim.size());
  for (std::size_t s = 0; s < sim.size(); ++s) node[s] = task_of[group_of_slot[s]];
  return node;
}

Node Emitter::group_collective(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                               StreamClass stream, GroupKind kind, CollectiveOp op, std::int64_t bytes,
                               const Uses& uses) {
  const auto work_of = [&](GroupId group) {
    const auto size = static_cast<std::int64_t>(g_.group(group).size());
    return CollectiveWork{op, group, (bytes + size - 1) / size};
  };
  return collective(layer, pass, rest, stage, chunk, stream, kind, work_of, uses);
}

Node Emitter::all_to_all(int layer, Pass pass, const std::string& rest, const std::string& stage, int chunk,
                         StreamClass stream, bool to_experts, const Uses& uses) {
  const auto work_of = [&](GroupId group) {
    CollectiveWork work{CollectiveOp::kAllToAll, group, d_.a2a_bytes_per_peer(chunk)};
    if (!traffic_.empty()) {
      // The routed rows of this chunk: dispatch-direction collectives send them from the token's
      // rank to the expert's; the others send them back.
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

void Emitter::bind(const Node& task, TaskGraph::Access access, const Buf& buf, const RangeOf& range_of) {
  if (task.empty() || buf.empty()) return;
  for (std::size_t s = 0; s < task.size(); ++s) {
    const auto [offset, bytes] = range_of(loads_[s]);
    if (bytes > 0) g_.bind_operand(task[s], access, Operand{buf[s], offset, bytes, d_.storage_dtype});
  }
}

Emitter::RangeOf Emitter::chunk_rows(int chunk, std::int64_t cols, bool in_slot) const {
  return [this, chunk, cols, in_slot](const RankLoad& load) {
    std::int64_t before = 0;
    if (!in_slot)
      for (int c = 0; c < chunk; ++c) before = checked_add(before, load.received_in(c));
    return std::pair{bytes(before, cols), bytes(load.received_in(chunk), cols)};
  };
}

void Emitter::edge(const Node& from, const Node& to, DepKind kind) {
  if (from.empty() || to.empty()) return;
  for (std::size_t i = 0; i < from.size(); ++i) g_.add_dependency(from[i], to[i], kind);
}

GemmWork Emitter::gemm(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                       GemmLayout layout) const {
  GemmWork w;
  w.layout = layout;
  w.batch = batch;
  w.m = m;
  w.n = n;
  w.k = k;
  w.dtype = d_.gemm_dtype;
  w.element_bytes = d_.element_bytes;
  return w;
}

ElementwiseWork Emitter::elementwise(std::int64_t read_elems, std::int64_t written_elems, std::int64_t flops) const {
  return ElementwiseWork{checked_mul(read_elems, d_.element_bytes), checked_mul(written_elems, d_.element_bytes),
                         flops};
}

std::int64_t Emitter::bytes(std::int64_t rows, std::int64_t cols) const {
  return checked_mul({rows, cols, static_cast<std::int64_t>(d_.element_bytes)});
}

std::int64_t Emitter::expert_rows(const RankLoad& load, int chunk) const {
  const std::int64_t rows = load.received_in(chunk);
  return (rows + d_.local_experts - 1) / d_.local_experts;
}

}  // namespace moesim
