#include "sim/step/step_lanes.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "sim/report/metrics.h"

namespace moesim {
namespace {

using Interval = std::pair<TimeNs, TimeNs>;

// Everything the rank runs but pipeline transfers, as disjoint intervals: the complement is the
// stage's bubble and host wait, as StageReport counts them.
std::vector<Interval> busy_intervals(const TaskGraph& g, const Trace& trace, int rank) {
  std::vector<Interval> all;
  for (int s = 0; s < kNumStreamClasses; ++s) {
    const auto stream = static_cast<StreamClass>(s);
    if (stream == StreamClass::kCommPipeline) continue;
    for (TaskIndex i : g.stream_tasks(rank, stream)) all.emplace_back(trace.records[i].start_ns, trace.records[i].end_ns);
  }
  return merged_intervals(std::move(all));
}

// The pass's own work: not the transfer into it, nor the side work it issues for later (gradient
// reductions, ZeRO-3's prefetched gathers), which may run on past its end. Its collectives are over
// the stage's own groups, which hold the rank.
bool part_of_pass(const Task& t, int rank) {
  if (t.stream == StreamClass::kCommPipeline || t.stream == StreamClass::kCommGrad) return false;
  return t.is_collective() || t.rank == rank;
}

std::optional<Interval> pass_extent(const TaskGraph& g, const Trace& trace, const PassSpan& p, int rank) {
  TimeNs start = std::numeric_limits<TimeNs>::max();
  TimeNs end = std::numeric_limits<TimeNs>::min();
  for (TaskIndex i = p.first; i < p.end; ++i) {
    if (!part_of_pass(g.task(i), rank)) continue;
    start = std::min(start, trace.records[i].start_ns);
    end = std::max(end, trace.records[i].end_ns);
  }
  if (start >= end) return std::nullopt;
  return Interval{start, end};
}

// The stage's passes in program order (the order they were emitted in), each clipped to start
// where the previous one ended; an interleaved pair's backward joins its forward's segment.
std::vector<LaneSegment> stage_passes(const StepGraph& sg, const Trace& trace, int stage, int rank) {
  std::vector<LaneSegment> out;
  TimeNs previous_end = 0;
  std::optional<TaskIndex> paired_from;  // the backward's first task, right after an interleaved forward's segment
  const auto interleaved_from = [&](TaskIndex first) {  // sg.interleaved is in emission order
    const auto it = std::lower_bound(sg.interleaved.begin(), sg.interleaved.end(), first,
                                     [](const StepGraph::Interleaved& r, TaskIndex f) { return r.first < f; });
    return it != sg.interleaved.end() && it->first == first;
  };
  for (const PassSpan& p : sg.passes) {
    if (p.stage != stage) continue;
    const std::optional<Interval> extent = pass_extent(sg.graph, trace, p, rank);
    if (paired_from && p.first == *paired_from) {
      paired_from.reset();
      LaneSegment& pair = out.back();
      pair.paired = p.action;
      pair.paired_part = p.part;
      if (extent) pair.end_ns = std::max(pair.end_ns, extent->second);
      previous_end = pair.end_ns;
      continue;
    }
    paired_from.reset();
    if (!extent || extent->second <= previous_end) continue;
    LaneSegment s;
    s.kind = LaneSegmentKind::kPass;
    s.start_ns = std::max(extent->first, previous_end);
    s.end_ns = extent->second;
    s.action = p.action;
    s.part = p.part;
    s.true_start_ns = extent->first;
    out.push_back(s);
    previous_end = s.end_ns;
    if (interleaved_from(p.first)) paired_from = p.end;
  }
  return out;
}

void add_segment(std::vector<LaneSegment>& out, LaneSegmentKind kind, TimeNs start, TimeNs end) {
  if (end <= start) return;
  LaneSegment s;
  s.kind = kind;
  s.start_ns = start;
  s.end_ns = end;
  out.push_back(s);
}

// One busy interval cut into the passes (or their parts) inside it and other work between them;
// `next` is the first pass that may reach into it, moved past those that end inside it.
void cut_busy(const Interval& busy, const std::vector<LaneSegment>& passes, std::size_t& next,
              std::vector<LaneSegment>& out) {
  TimeNs cursor = busy.first;
  while (next < passes.size() && passes[next].end_ns <= busy.first) ++next;
  while (next < passes.size() && passes[next].start_ns < busy.second) {
    const LaneSegment& p = passes[next];
    add_segment(out, LaneSegmentKind::kOther, cursor, p.start_ns);
    LaneSegment piece = p;
    piece.start_ns = std::max(p.start_ns, cursor);
    piece.end_ns = std::min(p.end_ns, busy.second);
    out.push_back(piece);
    cursor = piece.end_ns;
    if (p.end_ns > busy.second) break;  // the pass goes on after an idle gap
    ++next;
  }
  add_segment(out, LaneSegmentKind::kOther, cursor, busy.second);
}

StageLane stage_lane(const StepGraph& sg, const EngineRun& run, int stage, TimeNs step_ns) {
  StageLane lane;
  lane.stage = stage;
  lane.rank = sg.shape.stage_rank(stage);
  const std::vector<LaneSegment> passes = stage_passes(sg, run.trace, stage, lane.rank);
  std::size_t next = 0;
  TimeNs idle_from = 0;
  for (const Interval& busy : busy_intervals(sg.graph, run.trace, lane.rank)) {
    add_segment(lane.segments, LaneSegmentKind::kBubble, idle_from, busy.first);
    cut_busy(busy, passes, next, lane.segments);
    idle_from = busy.second;
  }
  add_segment(lane.segments, LaneSegmentKind::kBubble, idle_from, step_ns);
  return lane;
}

}  // namespace

std::vector<StageLane> step_lanes(const StepGraph& graph, const EngineRun& run) {
  const TimeNs step_ns = run.trace.makespan_ns();
  std::vector<StageLane> lanes;
  for (int s = 0; s < graph.shape.stages(); ++s) lanes.push_back(stage_lane(graph, run, s, step_ns));
  return lanes;
}

}  // namespace moesim
