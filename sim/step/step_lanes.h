// step_lanes: a simulated training step as one lane per pipeline stage (its representative rank),
// cut into the passes of its microbatches, other work and bubbles: what the HTML report's
// timeline draws (step_html.h). A pass, not a kernel, is the unit, so a step of half a million
// tasks gives a few thousand segments.
//
// A lane's segments are disjoint, in time order, and cover [0, step time] exactly:
//   pass    one pipeline action (F, B, Bi or W of one microbatch through one chunk, PassSpan):
//           from the start of its first task on the rank to the end of its last, its
//           tensor-parallel and expert-parallel collectives included; the pipeline transfer into
//           it and the gradient reductions and ZeRO gathers it issues (side work on comm.pipeline
//           and comm.grad) are not. The next pass may begin while the previous one's last
//           collective is in flight (it waits only for the compute stream): that overlap is
//           drawn as the earlier pass's, so the later one's drawn start is clipped; its true
//           start is kept (true_start_ns);
//   other   the rank runs something other than pipeline transfers outside every pass: the
//           optimizer, gradient reductions and weight gathers, the embedding's all-reduce;
//   bubble  the rank runs nothing but pipeline transfers: the sum of a lane's bubbles is the
//           StageReport's bubble_ns plus its host_wait_ns (idle while tasks wait for their
//           launch, --host-launch-us; not drawn apart).
#pragma once

#include <optional>
#include <vector>

#include "sim/driver/simulation.h"
#include "sim/step/step_graph.h"

namespace moesim {

enum class LaneSegmentKind { kPass, kOther, kBubble };

struct LaneSegment {
  LaneSegmentKind kind = LaneSegmentKind::kBubble;
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;
  // For a pass only:
  PipeAction action;
  int part = 0;
  TimeNs true_start_ns = 0;  // before clipping against the previous pass
  // An interleaved pair (DualPipe's or combined 1F1B's, StepGraph::interleaved) is one segment:
  // `action` the forward, `paired` the backward that ran interleaved with it, `paired_part` its part.
  std::optional<PipeAction> paired;
  int paired_part = 0;
};

struct StageLane {
  int stage = 0;
  int rank = 0;
  std::vector<LaneSegment> segments;
};

std::vector<StageLane> step_lanes(const StepGraph& graph, const EngineRun& run);

}  // namespace moesim
