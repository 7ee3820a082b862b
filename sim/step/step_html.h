// step_html: the self-contained HTML report of one simulated training step, what
// `moesim simulate --global-batch N --html FILE` writes (issue 23 item 7). No script, font or
// network resource: inline CSS and SVG, as the sweep's report (sim/report/sweep_html.cc).
//
//   header     model, hardware, the layout and the step's metrics, every number as the JSON report
//              (step_report_json) has it, in the cell's tooltip, and rounded in the cell;
//   stages     per pipeline stage, StageReport's times as stacked bars, its peak memory as model
//              states and the rest against the capacity less the reserve, and a table of both;
//   timeline   one lane per stage's representative rank: its passes (F, B, Bi, W of each
//              microbatch and chunk), other work and bubbles (step_lanes.h), so a DeepSeek-V3 step
//              of half a million tasks draws some thousands of bars.
#pragma once

#include <string>

#include "sim/step/step_simulation.h"

namespace moesim {

std::string step_html(const SimulatedStep& sim, const ModelSpec& model, const ClusterSpec& cluster,
                      const StepSpec& spec, const std::string& version);

}  // namespace moesim
