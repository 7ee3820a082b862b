#include "runtime/exec/stream_plan.h"

#include <algorithm>
#include <map>
#include <string>

#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"

namespace moesim::runtime {

std::int64_t StreamPlan::num_waits() const {
  std::int64_t n = 0;
  for (const PlannedTask& t : tasks) n += static_cast<std::int64_t>(t.waits.size());
  return n;
}

namespace {

bool runs_on(const TaskGraph& graph, TaskIndex i, int rank) {
  const Task& t = graph.task(i);
  if (!t.is_collective()) return t.rank == rank;
  const std::vector<int> ranks = graph.ranks_of(i);
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

}  // namespace

StreamPlan plan_streams(const TaskGraph& graph, int rank) {
  if (!graph.is_simulated(rank))
    throw InputError("execution plan: rank " + std::to_string(rank) + " is not simulated by the graph");
  StreamPlan plan;
  plan.rank = rank;
  plan.stream_of_class.fill(-1);

  const std::vector<TaskIndex> order = topological_order(graph);
  std::vector<TaskIndex> mine;
  for (TaskIndex i : order)
    if (runs_on(graph, i, rank)) mine.push_back(i);
  std::array<bool, kNumStreamClasses> used{};
  for (TaskIndex i : mine) used[static_cast<std::size_t>(graph.task(i).stream)] = true;
  for (int c = 0; c < kNumStreamClasses; ++c)
    if (used[static_cast<std::size_t>(c)]) {
      plan.stream_of_class[static_cast<std::size_t>(c)] = static_cast<int>(plan.streams.size());
      plan.streams.push_back(static_cast<StreamClass>(c));
    }
  const std::size_t num_streams = plan.streams.size();

  // Per planned task: its slot in `plan.tasks` and its vector clock at start (-1: nothing known).
  std::map<TaskIndex, std::size_t> slot_of;
  std::vector<std::vector<std::int64_t>> known;
  std::vector<std::int64_t> next_position(num_streams, 0);
  std::vector<std::int64_t> last_on_stream(num_streams, -1);  // slot of the stream's latest task
  std::map<TaskIndex, int> event_of;

  for (TaskIndex i : mine) {
    const Task& t = graph.task(i);
    PlannedTask pt;
    pt.task = i;
    pt.stream = plan.stream_of_class[static_cast<std::size_t>(t.stream)];
    const auto s = static_cast<std::size_t>(pt.stream);
    pt.position = next_position[s]++;
    std::vector<std::int64_t> clock(num_streams, -1);
    if (last_on_stream[s] >= 0) {
      const auto prev = static_cast<std::size_t>(last_on_stream[s]);
      clock = known[prev];
      clock[s] = plan.tasks[prev].position;
    }
    // Producers on other streams of this rank, latest issue position first.
    std::vector<std::size_t> producers;
    for (TaskIndex p : graph.predecessors(i)) {
      const auto it = slot_of.find(p);
      if (it == slot_of.end()) {
        // Another rank's task: that rank enters this collective only after it.
        if (t.is_collective()) continue;
        throw InputError("execution plan: task " + task_label(graph, i) + " on rank " + std::to_string(rank) +
                         " depends on " + task_label(graph, p) +
                         " of another rank without a collective in between; it cannot be lowered");
      }
      if (plan.tasks[it->second].stream != pt.stream) producers.push_back(it->second);
    }
    plan.cross_stream_dependencies += static_cast<std::int64_t>(producers.size());
    std::sort(producers.rbegin(), producers.rend());
    for (std::size_t ps : producers) {
      const PlannedTask& producer = plan.tasks[ps];
      const auto ls = static_cast<std::size_t>(producer.stream);
      if (clock[ls] >= producer.position) continue;  // implied by what is already known
      auto [ev, inserted] = event_of.try_emplace(producer.task, static_cast<int>(plan.events.size()));
      if (inserted) {
        plan.events.push_back(PlannedEvent{producer.task, producer.stream});
        plan.tasks[ps].records = ev->second;
      }
      pt.waits.push_back(ev->second);
      for (std::size_t k = 0; k < num_streams; ++k) clock[k] = std::max(clock[k], known[ps][k]);
      clock[ls] = std::max(clock[ls], producer.position);
    }
    std::sort(pt.waits.begin(), pt.waits.end());
    slot_of.emplace(i, plan.tasks.size());
    last_on_stream[s] = static_cast<std::int64_t>(plan.tasks.size());
    known.push_back(std::move(clock));
    plan.tasks.push_back(std::move(pt));
  }
  return plan;
}

}  // namespace moesim::runtime
