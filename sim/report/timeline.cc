#include "sim/report/timeline.h"

#include <algorithm>
#include <ostream>
#include <tuple>

#include "sim/core/error.h"

namespace moesim {

std::string compact_rank_list(const std::vector<int>& ranks) {
  std::string out;
  std::size_t i = 0;
  while (i < ranks.size()) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    // A run of two stays "a,b": "a-b" is kept for runs that save characters.
    if (j == i + 1) {
      out += ',' + std::to_string(ranks[j]);
    } else if (j > i + 1) {
      out += '-' + std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

namespace {

struct TimelineLine {
  TimeNs start_ns;
  TimeNs end_ns;
  std::vector<int> ranks;
  StreamClass stream;
  const std::string* id;

  bool operator<(const TimelineLine& o) const {
    return std::tie(start_ns, end_ns, ranks, stream, *id) < std::tie(o.start_ns, o.end_ns, o.ranks, o.stream, *o.id);
  }
};

void write_memory(std::ostream& out, const RankMemory& m) {
  out << "memory rank " << m.rank << " peak_device_bytes " << m.peak_device_bytes << " at_ns " << m.peak_time_ns;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    const auto category = static_cast<MemoryCategory>(c);
    if (category == MemoryCategory::kHostPinned) continue;  // never on the device
    out << ' ' << to_string(category) << ' ' << m.at_peak_bytes[static_cast<std::size_t>(c)];
  }
  out << " peak_host_pinned_bytes " << m.peak_host_pinned_bytes << '\n';
}

}  // namespace

void write_timeline(std::ostream& out, const TaskGraph& graph, const Trace& trace,
                    const std::vector<RankMemory>& memory) {
  if (trace.records.size() != graph.num_tasks())
    throw InternalError("timeline: the trace has " + std::to_string(trace.records.size()) + " records for " +
                        std::to_string(graph.num_tasks()) + " tasks");
  std::vector<TimelineLine> lines;
  lines.reserve(graph.num_tasks());
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const Task& t = graph.task(i);
    const TaskRecord& r = trace.records[i];
    lines.push_back({r.start_ns, r.end_ns, graph.ranks_of(i), t.stream, &t.id});  // groups are kept sorted
  }
  std::sort(lines.begin(), lines.end());
  out << "# moesim timeline v1\n"
         "# task START_NS END_NS RANKS STREAM ID, sorted by start, end, ranks, stream and id;\n"
         "# memory: each simulated rank's device peak, when it was reached and its breakdown then\n";
  out << "step_ns " << trace.makespan_ns() << '\n';
  out << "tasks " << graph.num_tasks() << " simulated_ranks " << compact_rank_list(graph.simulated_ranks())
      << " of " << graph.world_size() << '\n';
  for (const TimelineLine& l : lines)
    out << "task " << l.start_ns << ' ' << l.end_ns << ' ' << compact_rank_list(l.ranks) << ' ' << to_string(l.stream)
        << ' ' << *l.id << '\n';
  for (const RankMemory& m : memory) write_memory(out, m);
}

}  // namespace moesim
