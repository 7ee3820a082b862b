#include "sim/graph/task_graph.h"

#include <algorithm>
#include <array>

#include "sim/core/error.h"
#include "sim/graph/op_disagreement.h"

namespace moesim {
namespace {

constexpr std::array<std::pair<DepKind, std::string_view>, 3> kDepKinds{
    {{DepKind::kData, "data"}, {DepKind::kStream, "stream"}, {DepKind::kReuse, "reuse"}}};

const std::vector<TaskIndex> kNoTasks;

}  // namespace

std::string_view to_string(DepKind k) {
  for (const auto& [value, name] : kDepKinds)
    if (value == k) return name;
  return "?";
}

std::optional<DepKind> parse_dep_kind(std::string_view s) {
  for (const auto& [value, name] : kDepKinds)
    if (name == s) return value;
  return std::nullopt;
}

TaskGraph::TaskGraph(int world_size, std::vector<int> simulated_ranks)
    : world_size_(world_size), simulated_ranks_(std::move(simulated_ranks)) {
  if (world_size_ < 1) throw InputError("world size must be at least 1, got " + std::to_string(world_size_));
  std::sort(simulated_ranks_.begin(), simulated_ranks_.end());
  simulated_ranks_.erase(std::unique(simulated_ranks_.begin(), simulated_ranks_.end()),
                         simulated_ranks_.end());
  if (simulated_ranks_.empty()) throw InputError("a task graph must simulate at least one rank");
  for (int r : simulated_ranks_) {
    if (r < 0 || r >= world_size_)
      throw InputError("simulated rank " + std::to_string(r) + " is outside the world [0, " +
                       std::to_string(world_size_) + ")");
  }
  // A flag per rank up to a world of a million ranks (128 KiB); a graph file may declare more.
  if (world_size_ <= (1 << 20)) {
    simulated_flag_.assign(static_cast<std::size_t>(world_size_), false);
    for (int r : simulated_ranks_) simulated_flag_[static_cast<std::size_t>(r)] = true;
  }
}

bool TaskGraph::is_simulated(int rank) const {
  if (simulated_flag_.empty()) return std::binary_search(simulated_ranks_.begin(), simulated_ranks_.end(), rank);
  return rank >= 0 && rank < world_size_ && simulated_flag_[static_cast<std::size_t>(rank)];
}

GroupId TaskGraph::add_group(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) throw InputError("a rank group must not be empty");
  for (int r : ranks) {
    if (r < 0 || r >= world_size_)
      throw InputError("group member " + std::to_string(r) + " is outside the world [0, " +
                       std::to_string(world_size_) + ")");
  }
  auto it = group_ids_.find(ranks);
  if (it != group_ids_.end()) return it->second;
  const auto id = static_cast<GroupId>(groups_.size());
  group_ids_.emplace(ranks, id);
  groups_.push_back(std::move(ranks));
  return id;
}

std::vector<int> TaskGraph::ranks_of(TaskIndex i) const {
  const Task& t = graph_[i];
  if (const auto* c = std::get_if<CollectiveWork>(&t.work)) {
    std::vector<int> out;
    for (int r : groups_.at(c->group))
      if (is_simulated(r)) out.push_back(r);
    return out;
  }
  return {t.rank};
}

BufferId TaskGraph::add_buffer(Buffer buffer) {
  // Zero is allowed: with imbalanced routing a rank whose experts receive no rows holds empty
  // expert buffers.
  if (buffer.bytes < 0)
    throw InputError("buffer '" + buffer.name + "' must not have a negative size, got " +
                     std::to_string(buffer.bytes) + " bytes");
  if (!is_simulated(buffer.rank))
    throw InputError("buffer '" + buffer.name + "' is on rank " + std::to_string(buffer.rank) +
                     ", which this graph does not simulate");
  if (buffer_ids_.count({buffer.rank, buffer.name}) != 0)
    throw InputError("duplicate buffer '" + buffer.name + "' on rank " + std::to_string(buffer.rank));
  const auto id = static_cast<BufferId>(buffers_.size());
  buffer_ids_.emplace(std::make_pair(buffer.rank, buffer.name), id);
  buffers_.push_back(std::move(buffer));
  buffer_alloc_count_.push_back(0);
  buffer_free_count_.push_back(0);
  return id;
}

// A buffer is allocated by at most one task and freed by at most one, never if resident, and only
// by a task that runs on the buffer's rank.
void TaskGraph::check_buffer_use(const Task& task, BufferId id, const char* verb, const std::vector<int>& counts) const {
  if (id >= buffers_.size()) throw InputError("task '" + task.id + "' " + verb + " unknown buffer " + std::to_string(id));
  const Buffer& b = buffers_[id];
  if (b.resident)
    throw InputError("task '" + task.id + "' " + verb + " resident buffer '" + b.name +
                     "' (resident buffers live for the whole step)");
  if (counts[id] != 0)
    throw InputError("buffer '" + b.name + "' on rank " + std::to_string(b.rank) + " is " + verb +
                     " by more than one task (again by '" + task.id + "')");
  if (!runs_on(task, b.rank))
    throw InputError("task '" + task.id + "' " + verb + " buffer '" + b.name + "' of rank " + std::to_string(b.rank) +
                     ", where it does not run");
}

bool TaskGraph::runs_on(const Task& task, int rank) const {
  if (const auto* c = std::get_if<CollectiveWork>(&task.work)) {
    const std::vector<int>& members = groups_.at(c->group);
    return std::binary_search(members.begin(), members.end(), rank);
  }
  return task.rank == rank;
}

// An operand lies inside a buffer of a rank the task runs on; resident buffers may be bound (a
// GEMM reads the parameters).
void TaskGraph::check_operand(const Task& task, const Operand& o, const char* verb) const {
  if (o.buffer >= buffers_.size())
    throw InputError("task '" + task.id + "' " + verb + " unknown buffer " + std::to_string(o.buffer));
  const Buffer& b = buffers_[o.buffer];
  if (o.offset < 0 || o.bytes <= 0 || o.offset > b.bytes || o.bytes > b.bytes - o.offset)
    throw InputError("task '" + task.id + "' " + verb + " bytes [" + std::to_string(o.offset) + ", +" +
                     std::to_string(o.bytes) + ") of buffer '" + b.name + "', which holds " + std::to_string(b.bytes) +
                     " bytes (an operand is a non-empty range inside its buffer)");
  if (!runs_on(task, b.rank))
    throw InputError("task '" + task.id + "' " + verb + " buffer '" + b.name + "' of rank " + std::to_string(b.rank) +
                     ", where it does not run");
}

void TaskGraph::bind_operand(TaskIndex task, Access access, const Operand& operand) {
  if (task >= num_tasks()) throw InternalError("bind_operand: no task " + std::to_string(task));
  const bool read = access == Access::kRead;
  check_operand(graph_[task], operand, read ? "reads" : "writes");
  (read ? graph_[task].reads : graph_[task].writes).push_back(operand);
}

void TaskGraph::check_buffer_uses(const Task& task) const {
  for (BufferId id : task.allocates) check_buffer_use(task, id, "allocates", buffer_alloc_count_);
  for (BufferId id : task.frees) check_buffer_use(task, id, "frees", buffer_free_count_);
  for (const Operand& o : task.reads) check_operand(task, o, "reads");
  for (const Operand& o : task.writes) check_operand(task, o, "writes");
}

void TaskGraph::allocate_at(TaskIndex task, BufferId buffer) {
  if (task >= num_tasks()) throw InternalError("allocate_at: no task " + std::to_string(task));
  check_buffer_use(graph_[task], buffer, "allocates", buffer_alloc_count_);
  graph_[task].allocates.push_back(buffer);
  ++buffer_alloc_count_[buffer];
}

void TaskGraph::free_at(TaskIndex task, BufferId buffer) {
  if (task >= num_tasks()) throw InternalError("free_at: no task " + std::to_string(task));
  check_buffer_use(graph_[task], buffer, "frees", buffer_free_count_);
  graph_[task].frees.push_back(buffer);
  ++buffer_free_count_[buffer];
}

TaskIndex TaskGraph::add_task(Task task) {
  if (!task.op) {
    task.op = op_for(task.work);
  } else if (!op_agrees(*task.op, task.work)) {
    throw InputError("task '" + task.id + "': " + op_disagreement(*task.op, task.work));
  }
  int key_rank = task.rank;
  if (const auto* c = std::get_if<CollectiveWork>(&task.work)) {
    if (c->group >= groups_.size())
      throw InputError("task '" + task.id + "' refers to unknown group " + std::to_string(c->group));
    task.rank = -1;
    key_rank = -1;
  } else if (!is_simulated(task.rank)) {
    throw InputError("task '" + task.id + "' is on rank " + std::to_string(task.rank) +
                     ", which this graph does not simulate");
  }
  const std::size_t id_key = id_hash(key_rank, task.id);
  if (find_hashed(id_key, task.id, key_rank)) {
    throw InputError("duplicate task id '" + task.id + "'" +
                     (key_rank >= 0 ? " on rank " + std::to_string(key_rank) : std::string()));
  }
  check_buffer_uses(task);
  for (BufferId id : task.allocates) ++buffer_alloc_count_[id];
  for (BufferId id : task.frees) ++buffer_free_count_[id];
  const TaskIndex index = static_cast<TaskIndex>(boost::add_vertex(std::move(task), graph_));
  by_id_.insert(id_key, index);

  const std::vector<int> ranks = ranks_of(index);
  if (ranks.empty()) {
    throw InputError("collective '" + graph_[index].id + "' has no member among the simulated ranks");
  }
  if (!held_from_) append_to_streams(index, ranks);
  return index;
}

void TaskGraph::append_to_streams(TaskIndex index, const std::vector<int>& ranks) {
  const StreamClass stream = graph_[index].stream;
  for (int r : ranks) {
    auto& seq = streams_[{r, static_cast<int>(stream)}];
    if (!seq.empty() && is_ordered_stream(stream)) add_dependency(seq.back(), index, DepKind::kStream);
    seq.push_back(index);
  }
}

void TaskGraph::hold_stream_order() {
  if (held_from_) throw InternalError("hold_stream_order: the stream order is already held");
  held_from_ = static_cast<TaskIndex>(num_tasks());
}

void TaskGraph::release_stream_order(const std::vector<TaskIndex>& order) {
  if (!held_from_) throw InternalError("release_stream_order without hold_stream_order");
  const TaskIndex from = *held_from_;
  const std::size_t held = num_tasks() - from;
  std::vector<bool> seen(held, false);
  if (order.size() != held) throw InternalError("release_stream_order: the order does not list every held task once");
  for (TaskIndex i : order) {
    if (i < from || i >= num_tasks() || seen[i - from])
      throw InternalError("release_stream_order: the order does not list every held task once");
    seen[i - from] = true;
  }
  held_from_.reset();
  reordered_ = reordered_ || !std::is_sorted(order.begin(), order.end());
  for (TaskIndex i : order) append_to_streams(i, ranks_of(i));
}

void TaskGraph::add_dependency(TaskIndex from, TaskIndex to, DepKind kind) {
  const auto n = num_tasks();
  if (from >= n || to >= n)
    throw InputError("dependency refers to a missing task index (" + std::to_string(from) + " -> " +
                     std::to_string(to) + ", graph has " + std::to_string(n) + " tasks)");
  if (from == to) throw InputError("task '" + graph_[from].id + "' cannot depend on itself");
  // One edge per pair. A stream edge that is also a data or reuse dependency keeps the stronger
  // meaning, so the IR (and its JSON) still says the consumer needs the producer's output.
  if (const auto [e, exists] = boost::edge(from, to, graph_); exists) {
    if (graph_[e] == DepKind::kStream && kind != DepKind::kStream) graph_[e] = kind;
    return;
  }
  boost::add_edge(from, to, kind, graph_);
}

std::vector<TaskIndex> TaskGraph::predecessors(TaskIndex i) const {
  std::vector<TaskIndex> out;
  for (auto [it, end] = boost::in_edges(i, graph_); it != end; ++it)
    out.push_back(static_cast<TaskIndex>(boost::source(*it, graph_)));
  return out;
}

std::vector<TaskIndex> TaskGraph::successors(TaskIndex i) const {
  std::vector<TaskIndex> out;
  for (auto [it, end] = boost::out_edges(i, graph_); it != end; ++it)
    out.push_back(static_cast<TaskIndex>(boost::target(*it, graph_)));
  return out;
}

std::vector<std::tuple<TaskIndex, TaskIndex, DepKind>> TaskGraph::edges() const {
  std::vector<std::tuple<TaskIndex, TaskIndex, DepKind>> out;
  for (TaskIndex v = 0; v < num_tasks(); ++v) {
    const std::size_t first = out.size();
    for (auto [it, end] = boost::out_edges(v, graph_); it != end; ++it)
      out.emplace_back(v, static_cast<TaskIndex>(boost::target(*it, graph_)), graph_[*it]);
    // By target, not insertion: a graph read back from JSON adds its stream edges before the data
    // edges, and must list its edges in the same order as the graph it was written from.
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  }
  return out;
}

std::optional<TaskIndex> TaskGraph::find(std::string_view id, int rank) const {
  return find_hashed(id_hash(rank, id), id, rank);
}

std::optional<TaskIndex> TaskGraph::find_hashed(std::size_t hash, std::string_view id, int rank) const {
  return by_id_.find(hash, [&](TaskIndex i) {
    const Task& t = graph_[i];
    return t.rank == rank && t.id == id;
  });
}

const std::vector<TaskIndex>& TaskGraph::stream_tasks(int rank, StreamClass stream) const {
  auto it = streams_.find({rank, static_cast<int>(stream)});
  return it == streams_.end() ? kNoTasks : it->second;
}

}  // namespace moesim
