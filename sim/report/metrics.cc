#include "sim/report/metrics.h"

#include <algorithm>

#include "sim/core/error.h"

namespace moesim {
namespace {

std::string stage_key(const Task& t) { return std::string(to_string(t.pass)) + "." + t.stage; }

}  // namespace

std::vector<std::pair<TimeNs, TimeNs>> merged_intervals(std::vector<std::pair<TimeNs, TimeNs>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  // In place: the merged intervals are written over the sorted ones, never ahead of the reading.
  std::size_t kept = 0;
  for (const auto& [s, e] : intervals) {
    if (e <= s) continue;
    if (kept > 0 && s <= intervals[kept - 1].second) {
      intervals[kept - 1].second = std::max(intervals[kept - 1].second, e);
    } else {
      intervals[kept++] = {s, e};
    }
  }
  intervals.resize(kept);
  return intervals;
}

TimeNs union_length(std::vector<std::pair<TimeNs, TimeNs>> intervals) {
  TimeNs total = 0;
  for (const auto& [s, e] : merged_intervals(std::move(intervals))) total += e - s;
  return total;
}

namespace {

using Intervals = std::vector<std::pair<TimeNs, TimeNs>>;

// The rank's task intervals, by stage (in first-seen order) and by stream kind.
struct RankIntervals {
  std::map<std::string, int> stage_ids;
  std::vector<Intervals> stages;
  Intervals compute, comm, copy, all;
  // Sweep events for exposed time: (time, +1 start / -1 end, stage id).
  std::vector<std::tuple<TimeNs, int, int>> events;
  TimeNs bwd_start = kNever;
  TimeNs bwd_end = 0;
};

// Adds one of the rank's tasks: its intervals, and the totals and ends it contributes to m.
void add_task(const Task& t, const TaskRecord& r, RankIntervals& iv, StepMetrics& m) {
  const std::string key = stage_key(t);
  auto [it, inserted] = iv.stage_ids.emplace(key, static_cast<int>(iv.stages.size()));
  if (inserted) {
    iv.stages.emplace_back();
    m.stage_order.push_back(key);
  }
  const int sid = it->second;
  iv.stages[sid].emplace_back(r.start_ns, r.end_ns);
  m.stages[key].num_tasks += 1;
  const auto span = std::make_pair(r.start_ns, r.end_ns);
  iv.all.push_back(span);
  if (t.stream == StreamClass::kCompute) iv.compute.push_back(span);
  if (is_comm_stream(t.stream)) iv.comm.push_back(span);
  if (is_copy_stream(t.stream)) iv.copy.push_back(span);
  m.sum_task_ns += r.end_ns - r.start_ns;
  m.step_ns = std::max(m.step_ns, r.end_ns);
  if (t.pass == Pass::kForward) {
    m.forward_ns = std::max(m.forward_ns, r.end_ns);
  } else {
    iv.bwd_start = std::min(iv.bwd_start, r.start_ns);
    iv.bwd_end = std::max(iv.bwd_end, r.end_ns);
  }
  if (r.end_ns > r.start_ns) {
    iv.events.emplace_back(r.start_ns, +1, sid);
    iv.events.emplace_back(r.end_ns, -1, sid);
  }
}

// Exposed: between consecutive event times, if exactly one stage is active, it is exposed.
std::vector<TimeNs> exposed_per_stage(std::vector<std::tuple<TimeNs, int, int>> events, std::size_t num_stages) {
  std::sort(events.begin(), events.end());
  std::vector<int> active(num_stages, 0);
  int num_active_stages = 0;
  std::vector<TimeNs> exposed(num_stages, 0);
  TimeNs prev = 0;
  for (std::size_t e = 0; e < events.size();) {
    const TimeNs now = std::get<0>(events[e]);
    if (num_active_stages == 1 && now > prev) {
      for (std::size_t s = 0; s < active.size(); ++s)
        if (active[s] > 0) exposed[s] += now - prev;
    }
    for (; e < events.size() && std::get<0>(events[e]) == now; ++e) {
      const int sid = std::get<2>(events[e]);
      const int before = active[sid];
      active[sid] += std::get<1>(events[e]);
      if (before == 0 && active[sid] > 0) ++num_active_stages;
      if (before > 0 && active[sid] == 0) --num_active_stages;
    }
    prev = now;
  }
  return exposed;
}

void set_busy_and_overlap(const RankIntervals& iv, StepMetrics& m) {
  m.compute_busy_ns = union_length(iv.compute);
  m.comm_busy_ns = union_length(iv.comm);
  m.copy_busy_ns = union_length(iv.copy);
  const TimeNs union_all = union_length(iv.all);
  m.overlap_ns = m.compute_busy_ns + m.comm_busy_ns + m.copy_busy_ns - union_all;
  // The fraction looks at compute and communication only, so it lies in [0, 1] by construction.
  Intervals compute_or_comm = iv.compute;
  compute_or_comm.insert(compute_or_comm.end(), iv.comm.begin(), iv.comm.end());
  const TimeNs hidden = m.compute_busy_ns + m.comm_busy_ns - union_length(std::move(compute_or_comm));
  const TimeNs hideable = std::min(m.compute_busy_ns, m.comm_busy_ns);
  m.overlap_fraction = hideable > 0 ? static_cast<double>(hidden) / static_cast<double>(hideable) : 0.0;
}

}  // namespace

std::vector<StepMetrics> compute_ranks_metrics(const TaskGraph& graph, const Trace& trace, const std::vector<int>& ranks) {
  MOESIM_CHECK(trace.records.size() == graph.num_tasks(), "trace and graph sizes differ");
  // One walk over the tasks for every rank asked: a whole step's report asks for one rank per
  // pipeline stage, and a walk per rank cost O(tasks x stages).
  std::vector<int> slot(static_cast<std::size_t>(graph.world_size()), -1);
  std::vector<StepMetrics> out(ranks.size());
  std::vector<RankIntervals> iv(ranks.size());
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    MOESIM_CHECK(ranks[k] >= 0 && ranks[k] < graph.world_size(), "rank out of range");
    MOESIM_CHECK(slot[static_cast<std::size_t>(ranks[k])] < 0, "a rank asked twice");
    slot[static_cast<std::size_t>(ranks[k])] = static_cast<int>(k);
    out[k].rank = ranks[k];
  }
  const auto add = [&](const Task& t, const TaskRecord& r, int rank) {
    const int k = slot[static_cast<std::size_t>(rank)];
    if (k >= 0) add_task(t, r, iv[static_cast<std::size_t>(k)], out[static_cast<std::size_t>(k)]);
  };
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const Task& t = graph.task(i);
    const TaskRecord& r = trace.records[i];
    MOESIM_CHECK(r.start_ns >= 0 && r.end_ns >= r.start_ns, "task '" + t.id + "' has no valid record");
    if (!t.is_collective()) {
      add(t, r, t.rank);
      continue;
    }
    for (int rank : graph.ranks_of(i)) add(t, r, rank);
  }
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    RankIntervals& v = iv[k];
    StepMetrics& m = out[k];
    if (v.bwd_start != kNever) m.backward_ns = v.bwd_end - v.bwd_start;
    for (const auto& [key, sid] : v.stage_ids) m.stages[key].busy_ns = union_length(v.stages[sid]);
    const std::vector<TimeNs> exposed = exposed_per_stage(std::move(v.events), v.stages.size());
    for (const auto& [key, sid] : v.stage_ids) m.stages[key].exposed_ns = exposed[sid];
    set_busy_and_overlap(v, m);
  }
  return out;
}

StepMetrics compute_rank_metrics(const TaskGraph& graph, const Trace& trace, int rank) {
  return std::move(compute_ranks_metrics(graph, trace, {rank}).front());
}

StepMetrics compute_step_metrics(const TaskGraph& graph, const Trace& trace) {
  int critical = graph.simulated_ranks().front();
  TimeNs latest = -1;
  TimeNs most_work = -1;
  std::vector<TimeNs> end_of_rank(static_cast<std::size_t>(graph.world_size()), 0);
  // Local work per rank breaks ties: collectives end together on all their members, so with
  // imbalanced routing every rank may end at once, held back by the one with the most to compute.
  std::vector<TimeNs> local_work(static_cast<std::size_t>(graph.world_size()), 0);
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const TaskRecord& rec = trace.records[i];
    for (int r : graph.ranks_of(i)) end_of_rank[r] = std::max(end_of_rank[r], rec.end_ns);
    if (!graph.task(i).is_collective()) local_work[graph.task(i).rank] += rec.end_ns - rec.start_ns;
  }
  for (int r : graph.simulated_ranks()) {
    const auto k = static_cast<std::size_t>(r);
    if (end_of_rank[k] > latest || (end_of_rank[k] == latest && local_work[k] > most_work)) {
      latest = end_of_rank[k];
      most_work = local_work[k];
      critical = r;
    }
  }
  return compute_rank_metrics(graph, trace, critical);
}

}  // namespace moesim
