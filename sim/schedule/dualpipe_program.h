// DualPipe's and DualPipeV's program of one stage (pipeline_schedule.h has the vocabulary;
// stage_programs calls these for PipelineSchedule::kDualPipe and kDualPipeV). Kept apart because its eight phases are long.
#pragma once

#include <vector>

#include "sim/schedule/pipeline_schedule.h"

namespace moesim {

// The order DualPipe.step (deepseek-ai/DualPipe, dualpipe/dualpipe.py) runs stage `stage`'s passes
// in: `shape` must have even stages and an even number of microbatches, at least 2 x stages.
std::vector<PipeAction> dualpipe_program(const PipelineShape& shape, int stage);
// The order DualPipeV.step (dualpipe/dualpipev.py) runs stage `stage`'s passes in: `shape` must
// have at least 2 x stages microbatches.
std::vector<PipeAction> dualpipev_program(const PipelineShape& shape, int stage);

}  // namespace moesim
