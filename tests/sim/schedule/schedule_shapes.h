// The shapes the schedule tests sweep: stages 1..8, virtual stages 1..4, microbatches 1..32,
// the ones each schedule accepts (schedule_problem is "").
#pragma once

#include <vector>

#include "sim/schedule/pipeline_schedule.h"

namespace moesim::testing {

inline constexpr PipelineSchedule kAllSchedules[] = {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB,
                                                     PipelineSchedule::kInterleaved, PipelineSchedule::kZeroBubbleH1,
                                                     PipelineSchedule::kDualPipe, PipelineSchedule::kDualPipeV};

inline std::vector<PipelineShape> legal_shapes(PipelineSchedule schedule) {
  std::vector<PipelineShape> out;
  for (int p = 1; p <= 8; ++p) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = 1; m <= 32; ++m) {
        const PipelineShape shape{p, v, m};
        if (schedule_problem(schedule, shape).empty()) out.push_back(shape);
      }
    }
  }
  return out;
}

}  // namespace moesim::testing
