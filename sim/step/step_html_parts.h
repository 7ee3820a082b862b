// The pieces of the step's HTML report (step_html.h): the page and its tables in step_html.cc,
// the charts in step_html_charts.cc. Numbers come from the JSON report, parsed, so that the page
// shows what the JSON says to the last digit.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/step/step_lanes.h"

namespace moesim::step_html_detail {

using Json = nlohmann::ordered_json;

// A StageReport time as the JSON names it, what the report calls it and its colour.
struct StageTimeField {
  const char* key;
  const char* name;
  const char* color;
};
const std::vector<StageTimeField>& stage_time_fields();

// The colours of the memory bars.
inline constexpr const char* kModelStatesColor = "#1f77b4";
inline constexpr const char* kActivationsColor = "#ff7f0e";
inline constexpr const char* kUsableColor = "#d62728";
inline constexpr const char* kCapacityColor = "#555555";

// The JSON number's own text (as `step_report_json` prints it) and a reading of it.
std::string json_text(const Json& value);
double gib_of(const Json& bytes);

// The stacked bars of each stage's times, with the step time marked.
std::string stage_time_chart(const Json& report);
// Each stage's peak as model states and the rest, the capacity and the capacity less the reserve marked.
std::string stage_memory_chart(const Json& report);
// The legend and the SVG of the lanes; the page's CSS colours the passes by class (timeline_css).
std::string timeline_section(const std::vector<StageLane>& lanes, double step_s);
std::string timeline_css();

}  // namespace moesim::step_html_detail
