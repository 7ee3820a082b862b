#include "sim/graph/graph_algorithms.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "sim/core/checked_math.h"
#include "sim/core/error.h"

namespace moesim {

std::optional<std::vector<TaskIndex>> find_cycle(const TaskGraph& graph) {
  const std::size_t n = graph.num_tasks();
  enum class Color : unsigned char { kWhite, kGrey, kBlack };
  std::vector<Color> color(n, Color::kWhite);
  // Iterative DFS: graphs of every rank of a large job are too deep for recursion.
  struct Frame {
    TaskIndex v;
    std::vector<TaskIndex> next;
    std::size_t pos;
  };
  std::vector<Frame> stack;
  for (TaskIndex root = 0; root < n; ++root) {
    if (color[root] != Color::kWhite) continue;
    color[root] = Color::kGrey;
    stack.push_back({root, graph.successors(root), 0});
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.pos == top.next.size()) {
        color[top.v] = Color::kBlack;
        stack.pop_back();
        continue;
      }
      const TaskIndex w = top.next[top.pos++];
      if (color[w] == Color::kGrey) {
        std::vector<TaskIndex> cycle;
        auto it = std::find_if(stack.begin(), stack.end(), [w](const Frame& f) { return f.v == w; });
        for (; it != stack.end(); ++it) cycle.push_back(it->v);
        cycle.push_back(w);
        return cycle;
      }
      if (color[w] == Color::kWhite) {
        color[w] = Color::kGrey;
        stack.push_back({w, graph.successors(w), 0});
      }
    }
  }
  return std::nullopt;
}

std::string task_label(const TaskGraph& graph, TaskIndex i) {
  const Task& t = graph.task(i);
  if (graph.simulated_ranks().size() > 1 && !t.is_collective())
    return t.id + "@" + std::to_string(t.rank);
  return t.id;
}

std::string describe_path(const TaskGraph& graph, const std::vector<TaskIndex>& path) {
  std::string s;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i > 0) s += " -> ";
    s += task_label(graph, path[i]);
  }
  return s;
}

void check_acyclic(const TaskGraph& graph) {
  if (auto cycle = find_cycle(graph))
    throw InputError("dependency cycle: " + describe_path(graph, *cycle));
}

std::vector<TaskIndex> topological_order(const TaskGraph& graph) {
  const std::size_t n = graph.num_tasks();
  std::vector<std::size_t> indegree(n, 0);
  for (TaskIndex v = 0; v < n; ++v) indegree[v] = graph.predecessors(v).size();
  std::priority_queue<TaskIndex, std::vector<TaskIndex>, std::greater<>> ready;
  for (TaskIndex v = 0; v < n; ++v)
    if (indegree[v] == 0) ready.push(v);
  std::vector<TaskIndex> order;
  order.reserve(n);
  while (!ready.empty()) {
    const TaskIndex v = ready.top();
    ready.pop();
    order.push_back(v);
    for (TaskIndex w : graph.successors(v))
      if (--indegree[w] == 0) ready.push(w);
  }
  if (order.size() != n) {
    check_acyclic(graph);
    MOESIM_CHECK(false, "Kahn's algorithm stalled on a graph without a cycle");
  }
  return order;
}

CriticalPath critical_path(const TaskGraph& graph, const std::vector<TimeNs>& durations) {
  const std::size_t n = graph.num_tasks();
  MOESIM_CHECK(durations.size() == n, "critical_path needs one duration per task (" +
                                          std::to_string(durations.size()) + " for " +
                                          std::to_string(n) + " tasks)");
  CriticalPath result;
  if (n == 0) return result;
  constexpr TaskIndex kNone = static_cast<TaskIndex>(-1);
  std::vector<TimeNs> finish(n, 0);
  std::vector<TaskIndex> via(n, kNone);
  for (TaskIndex v : topological_order(graph)) {
    MOESIM_CHECK(durations[v] >= 0, "negative duration for task '" + graph.task(v).id + "'");
    TimeNs start = 0;
    for (TaskIndex p : graph.predecessors(v)) {
      if (via[v] == kNone || finish[p] > start || (finish[p] == start && p < via[v])) {
        via[v] = p;
        start = finish[p];
      }
    }
    finish[v] = checked_add(start, durations[v]);
  }
  TaskIndex end = 0;
  for (TaskIndex v = 1; v < n; ++v)
    if (finish[v] > finish[end]) end = v;
  result.length_ns = finish[end];
  for (TaskIndex v = end; v != kNone; v = via[v]) result.path.push_back(v);
  std::reverse(result.path.begin(), result.path.end());
  return result;
}

bool has_path(const TaskGraph& graph, TaskIndex from, TaskIndex to) {
  std::vector<bool> seen(graph.num_tasks(), false);
  std::vector<TaskIndex> stack{from};
  bool found = false;
  while (!stack.empty() && !found) {
    const TaskIndex t = stack.back();
    stack.pop_back();
    graph.for_each_successor(t, [&](TaskIndex s) {
      if (s == to) found = true;
      if (!seen[s]) {
        seen[s] = true;
        stack.push_back(s);
      }
    });
  }
  return found;
}

}  // namespace moesim
