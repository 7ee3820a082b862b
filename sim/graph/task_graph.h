// TaskGraph: the IR both engines execute (design.md section 3), on Boost.Graph.
//
// Tasks are vertices in insertion order, which is also the issue order (unless a held range is
// released in another, hold_stream_order): on each (rank, stream) tasks run in the order they were
// added. add_task makes that explicit with a `stream` edge from the previous task on the same stream, so "all predecessors done" implies "stream free", and a
// collective, which is on every simulated member's stream, also waits for all of them
// (rendezvous); comm.pipeline, the pipeline's point-to-point transfers, is the exception: it gets
// no stream edges (task.h). Other edges are `data` (a consumer needs a producer's output) and `reuse` (chunk g
// waits for chunk g - slots to release a buffer slot).
//
// The graph may describe every rank of the world or only a subset (one representative rank when
// routing is balanced): `simulated_ranks` lists the ranks whose tasks are present; collective
// groups always list all members.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

#include "sim/graph/hash_index.h"
#include "sim/graph/task.h"

namespace moesim {

enum class DepKind { kData, kStream, kReuse };
std::string_view to_string(DepKind k);
std::optional<DepKind> parse_dep_kind(std::string_view s);

class TaskGraph {
 public:
  // The edge list a vector (not the default list, a node allocation per edge): edges are never removed.
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Task, DepKind,
                                      boost::no_property, boost::vecS>;

  // world_size: ranks in the whole job; simulated_ranks: ranks whose tasks this graph holds
  // (sorted, unique, each in [0, world_size)).
  TaskGraph(int world_size, std::vector<int> simulated_ranks);

  int world_size() const { return world_size_; }
  const std::vector<int>& simulated_ranks() const { return simulated_ranks_; }
  bool is_simulated(int rank) const;

  // Registers a rank group (sorted, unique ranks) and returns its id; equal groups share an id.
  GroupId add_group(std::vector<int> ranks);
  const std::vector<int>& group(GroupId id) const { return groups_.at(id); }
  std::size_t num_groups() const { return groups_.size(); }

  // Appends a task, adding stream edges from the previous task on its stream(s); a task without
  // an op gets op_for(its work). Throws InputError on an op that disagrees with the work
  // (op_agrees), a duplicate (rank, id), an unknown group, a rank outside the simulated set, a
  // collective whose group contains no simulated rank, or an operand bind_operand would refuse.
  TaskIndex add_task(Task task);

  // Adds a dependency edge `from -> to`. Duplicate edges are merged; a data or reuse edge added
  // over an existing stream edge takes its kind.
  void add_dependency(TaskIndex from, TaskIndex to, DepKind kind = DepKind::kData);

  std::size_t num_tasks() const { return boost::num_vertices(graph_); }
  const Task& task(TaskIndex i) const { return graph_[i]; }
  const Graph& boost_graph() const { return graph_; }

  // Ranks a task occupies: {rank} for local tasks, the simulated members of the group for
  // collectives.
  std::vector<int> ranks_of(TaskIndex i) const;

  std::vector<TaskIndex> predecessors(TaskIndex i) const;
  std::vector<TaskIndex> successors(TaskIndex i) const;
  // Without the vectors, for the engine's inner loop.
  std::size_t num_predecessors(TaskIndex i) const { return boost::in_degree(i, graph_); }
  template <typename F>
  void for_each_successor(TaskIndex i, F&& f) const {
    for (auto [it, end] = boost::out_edges(i, graph_); it != end; ++it) f(static_cast<TaskIndex>(boost::target(*it, graph_)));
  }
  // All edges in a deterministic order (by source, then target; duplicates are merged).
  std::vector<std::tuple<TaskIndex, TaskIndex, DepKind>> edges() const;

  // Adds `buffer` to what an existing task allocates at its start, for a buffer whose need is
  // known only after that task was added; the checks of add_task.
  void allocate_at(TaskIndex task, BufferId buffer);
  // Adds `buffer` to what an existing task frees at its end (the same checks).
  void free_at(TaskIndex task, BufferId buffer);

  // Binds an operand to an existing task (Task::reads or writes), for a block that knows which
  // bytes a task touches once the task exists. Throws InputError for an unknown buffer, a range
  // outside it or a buffer of a rank the task does not run on (add_task checks a task's own
  // operands the same way).
  enum class Access { kRead, kWrite };
  void bind_operand(TaskIndex task, Access access, const Operand& operand);

  // Registers a buffer; tasks refer to it by id in Task::allocates / Task::frees. Throws
  // InputError for a negative size, a rank the graph does not simulate, or a duplicate
  // (rank, name).
  BufferId add_buffer(Buffer buffer);
  const Buffer& buffer(BufferId id) const { return buffers_.at(id); }
  std::size_t num_buffers() const { return buffers_.size(); }

  // Lookup by id: for local tasks the rank must be given; collectives are found with rank -1.
  std::optional<TaskIndex> find(std::string_view id, int rank) const;

  // Tasks on one (rank, stream), in issue order.
  const std::vector<TaskIndex>& stream_tasks(int rank, StreamClass stream) const;

  // Issue order other than insertion order, for work a framework interleaves by hand (DualPipe's
  // overlapped forward and backward): after hold_stream_order(), add_task adds no stream edges;
  // release_stream_order(order) puts the tasks added since on their streams in `order` (each of
  // them exactly once), with the stream edges that order gives. Throws InternalError on a
  // nested hold, a release without a hold, or an order that is not those tasks.
  void hold_stream_order();
  void release_stream_order(const std::vector<TaskIndex>& order);
  // Whether some release put tasks on their streams in another order than their indices.
  bool stream_order_released() const { return reordered_; }

 private:
  int world_size_;
  std::vector<int> simulated_ranks_;
  // Per rank of the world, whether it is simulated (empty for a world above a million ranks, where
  // is_simulated searches simulated_ranks_): ranks_of asks for every member of a collective's
  // group, a thousand ranks for a data-parallel group at scale.
  std::vector<bool> simulated_flag_;
  void check_buffer_uses(const Task& task) const;
  void check_operand(const Task& task, const Operand& operand, const char* verb) const;
  bool runs_on(const Task& task, int rank) const;  // the task's rank, or a member of its group
  void check_buffer_use(const Task& task, BufferId id, const char* verb, const std::vector<int>& counts) const;

  std::vector<std::vector<int>> groups_;
  std::vector<Buffer> buffers_;
  std::map<std::pair<int, std::string>, BufferId, std::less<>> buffer_ids_;
  std::vector<int> buffer_alloc_count_;  // tasks allocating each buffer (at most one)
  std::vector<int> buffer_free_count_;   // tasks freeing each buffer (at most one)
  std::map<std::vector<int>, GroupId> group_ids_;
  // Tasks by the hash of (rank, id): the ids stay in the tasks alone (a graph of 600,000 tasks
  // copied every id into its key); equal hashes are told apart by comparing the tasks.
  static std::size_t id_hash(int rank, std::string_view id) {
    return std::hash<std::string_view>{}(id) * 31 + static_cast<std::size_t>(rank);
  }
  std::optional<TaskIndex> find_hashed(std::size_t hash, std::string_view id, int rank) const;
  HashIndex by_id_;
  std::map<std::pair<int, int>, std::vector<TaskIndex>> streams_;  // (rank, stream) -> tasks
  std::optional<TaskIndex> held_from_;  // hold_stream_order(): the first task added since
  bool reordered_ = false;
  void append_to_streams(TaskIndex index, const std::vector<int>& ranks);
  Graph graph_;
};

}  // namespace moesim
