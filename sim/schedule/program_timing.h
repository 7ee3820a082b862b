// Times stage programs (pipeline_schedule.h) with fixed pass durations and no transfer time: the
// closed-form check of a schedule, and a planner's quick estimate before a whole step is built.
// Each stage runs its program in order; an action starts when its stage is free and the actions
// it needs have ended:
//   F(mb, q)       needs F(mb, q - 1), wherever part q - 1 lives;
//   B/Bi(mb, q)    needs F(mb, q) and the B or Bi of (mb, q + 1);
//   W(mb, q)       needs Bi(mb, q);
// and a forward marked overlaps_next (DualPipe's F&B, the combined 1F1B's steady pairs) also waits
// for what the backward after it needs: the pair is launched together. The pair then takes F + B
// here, an upper bound (these durations have no communication apart, so the overlap the
// whole-step simulation gives the pair, each pass's collectives beside the other's kernels,
// StepBuilder::emit_overlapped, is not in it), unless the part's PassTimes give forward_paired:
// the pair's time less its backward's, measured (the layout planner's estimate).
// Durations are per pass of one model part: the same for every part and stage, or one PassTimes
// per model part (the layout planner's estimate: the first and last parts carry the embedding and
// the output head, and a pass's time may include the transfer that brings in its input).
#pragma once

#include <vector>

#include "sim/schedule/pipeline_schedule.h"

namespace moesim {

struct PassTimes {
  double forward = 1.0;
  double backward = 2.0;         // whole backward (kBackward)
  double backward_input = 1.0;   // kBackwardInput
  double backward_weight = 1.0;  // kBackwardWeight
  // A forward launched with the backward after it (overlaps_next): what the pair takes beyond the
  // backward's own time; negative: forward, as if the two did not overlap.
  double forward_paired = -1.0;
};

struct ProgramTiming {
  double makespan = 0.0;                   // when the last action ends (the first starts at 0)
  std::vector<double> busy;                // per stage: the sum of its actions' durations
  std::vector<std::vector<double>> start;  // start[s][i]: when programs[s][i] starts
};

// Throws InternalError when the programs deadlock (an action waits for one that never runs, or
// for one behind it on its own stage), name an action outside the shape, or repeat one.
ProgramTiming time_programs(PipelineSchedule schedule, const PipelineShape& shape,
                            const std::vector<std::vector<PipeAction>>& programs, const PassTimes& times);
// The same with part_times[q] the pass times of model part q (one per num_model_parts).
ProgramTiming time_programs_by_part(PipelineSchedule schedule, const PipelineShape& shape,
                                    const std::vector<std::vector<PipeAction>>& programs,
                                    const std::vector<PassTimes>& part_times);

}  // namespace moesim
