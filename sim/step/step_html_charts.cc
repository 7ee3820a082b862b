// The charts of the step's HTML report: stage times and memory as stacked bars, and the timeline
// of passes per stage.
#include <algorithm>
#include <cstdint>

#include "sim/report/plan_report.h"
#include "sim/report/svg_chart.h"
#include "sim/report/svg_lanes.h"
#include "sim/step/step_html_parts.h"

namespace moesim::step_html_detail {
namespace {

std::string stage_label(const Json& stage) { return "stage " + json_text(stage["stage"]); }

std::string stage_tooltip(const Json& stage) {
  return stage_label(stage) + ": rank " + json_text(stage["rank"]) + ", " + json_text(stage["layers"]) + " layers";
}

std::string seconds_text(double s) { return format_fixed(s, 4) + " s"; }

// A bar after the lane's last one.
void stack(Lane& lane, double value, const char* color, std::string tooltip) {
  const double start = lane.bars.empty() ? 0 : lane.bars.back().end;
  LaneBar b;
  b.start = start;
  b.end = start + value;
  b.fill = color;
  b.tooltip = std::move(tooltip);
  lane.bars.push_back(std::move(b));
}

LaneChartStyle chart_style(std::string plot, std::string label, std::string xlabel, double x_max, double width,
                           std::size_t lanes) {
  LaneChartStyle style;
  style.plot = std::move(plot);
  style.label = std::move(label);
  style.xlabel = std::move(xlabel);
  style.x_max = x_max;
  style.plot_width = width;
  style.lane_height = lane_height_for(lanes);
  return style;
}

Lane stage_lane(const Json& stage) { return Lane{stage_label(stage), stage_tooltip(stage), json_text(stage["stage"]), {}}; }

}  // namespace

const std::vector<StageTimeField>& stage_time_fields() {
  static const std::vector<StageTimeField> fields{
      {"compute_busy_s", "compute busy", "#1f77b4"},       {"bubble_s", "bubble", "#bdbdbd"},
      {"host_wait_s", "host wait", "#8c564b"},
      {"exposed_tp_s", "exposed tp", "#ff7f0e"},           {"exposed_p2p_s", "exposed p2p", "#9467bd"},
      {"exposed_grad_s", "exposed gradient reduction", "#2ca02c"}, {"exposed_a2a_s", "exposed all-to-all", "#d62728"}};
  return fields;
}

std::string stage_time_chart(const Json& report) {
  const double step_s = report["step_time_s"].get<double>();
  std::vector<Lane> lanes;
  double widest = step_s;
  for (const Json& stage : report["stages"]) {
    Lane lane = stage_lane(stage);
    for (const StageTimeField& f : stage_time_fields()) {
      const double v = stage[f.key].get<double>();
      stack(lane, v, f.color,
            stage_label(stage) + ": " + f.name + " " + seconds_text(v) + " (" + format_fixed(100 * v / step_s, 1) +
                "% of the step)");
    }
    widest = std::max(widest, lane.bars.back().end);
    lanes.push_back(std::move(lane));
  }
  return svg_lane_chart(lanes, {{step_s, "step " + seconds_text(step_s), "#000000"}},
                        chart_style("stage-times", "time per pipeline stage by kind", "seconds", widest, 800, lanes.size()));
}

std::string stage_memory_chart(const Json& report) {
  const double capacity = gib_of(report["memory_capacity_bytes"]);
  const double usable = capacity - gib_of(report["memory_reserve_bytes"]);
  std::vector<Lane> lanes;
  double widest = capacity;
  for (const Json& stage : report["stages"]) {
    Lane lane = stage_lane(stage);
    const double states = gib_of(stage["model_state_bytes"]);
    const double peak = gib_of(stage["peak_memory_bytes"]);
    stack(lane, states, kModelStatesColor, stage_label(stage) + ": model states " + format_fixed(states, 2) + " GiB");
    stack(lane, peak - states, kActivationsColor,
          stage_label(stage) + ": activations and other " + format_fixed(peak - states, 2) + " GiB (peak " +
              format_fixed(peak, 2) + " GiB)");
    widest = std::max(widest, peak);
    lanes.push_back(std::move(lane));
  }
  return svg_lane_chart(lanes,
                        {{usable, "usable " + format_fixed(usable, 2) + " GiB", kUsableColor},
                         {capacity, "capacity " + format_fixed(capacity, 2) + " GiB", kCapacityColor}},
                        chart_style("stage-memory", "peak memory per pipeline stage", "GiB", widest, 600, lanes.size()));
}

}  // namespace moesim::step_html_detail

namespace moesim::step_html_detail {
namespace {

// What the timeline draws, by CSS class: the four pipeline passes, other work and bubbles.
struct SegmentStyle {
  const char* css_class;
  const char* color;
  const char* name;
};

constexpr SegmentStyle kPassStyles[] = {{"F", "#4e79a7", "forward (F)"},
                                        {"B", "#f28e2b", "backward (B: input and weight gradients)"},
                                        {"Bi", "#e15759", "input gradient (Bi)"},
                                        {"W", "#59a14f", "weight gradient (W)"}};
constexpr SegmentStyle kOtherStyle{"o", "#9c755f", "other work (optimizer, gradient reductions, weight gathers)"};
constexpr SegmentStyle kBubbleStyle{"u", "#d9d9d9", "bubble (nothing but pipeline transfers, or idle)"};

const SegmentStyle& style_of(const LaneSegment& s) {
  switch (s.kind) {
    case LaneSegmentKind::kPass: return kPassStyles[static_cast<int>(s.action.work)];
    case LaneSegmentKind::kOther: return kOtherStyle;
    case LaneSegmentKind::kBubble: return kBubbleStyle;
  }
  return kBubbleStyle;
}

std::string ms(TimeNs t) { return format_ms(t); }

std::string segment_tooltip(const LaneSegment& s) {
  std::string text;
  if (s.kind == LaneSegmentKind::kPass) {
    text = std::string(to_string(s.action.work)) + " microbatch " + std::to_string(s.action.microbatch) + ", chunk " +
           std::to_string(s.action.chunk) + " (model part " + std::to_string(s.part) + ")";
    if (s.paired)
      text += " interleaved with " + std::string(to_string(s.paired->work)) + " microbatch " +
              std::to_string(s.paired->microbatch) + ", chunk " + std::to_string(s.paired->chunk) + " (model part " +
              std::to_string(s.paired_part) + ")";
  } else {
    text = s.kind == LaneSegmentKind::kOther ? "other work" : "bubble";
  }
  text += ": " + ms(s.start_ns) + " to " + ms(s.end_ns) + " ms (" + ms(s.end_ns - s.start_ns) + " ms)";
  if (s.kind == LaneSegmentKind::kPass && s.true_start_ns < s.start_ns)
    text += "; began at " + ms(s.true_start_ns) + " ms, while the previous pass's last collective ran";
  return text;
}

Lane timeline_lane(const StageLane& stage) {
  Lane lane{"stage " + std::to_string(stage.stage),
            "stage " + std::to_string(stage.stage) + ": rank " + std::to_string(stage.rank), std::to_string(stage.stage),
            {}};
  for (const LaneSegment& s : stage.segments) {
    LaneBar b;
    b.start = static_cast<double>(s.start_ns) * 1e-9;
    b.end = static_cast<double>(s.end_ns) * 1e-9;
    b.css_class = style_of(s).css_class;
    if (s.kind == LaneSegmentKind::kPass) b.text = std::to_string(s.action.microbatch);
    b.tooltip = segment_tooltip(s);
    lane.bars.push_back(std::move(b));
  }
  return lane;
}

// The kinds the lanes hold, in legend order.
std::vector<const SegmentStyle*> kinds_drawn(const std::vector<StageLane>& lanes) {
  std::vector<const SegmentStyle*> out;
  auto add = [&](const SegmentStyle& style) {
    for (const StageLane& lane : lanes)
      for (const LaneSegment& s : lane.segments)
        if (&style_of(s) == &style) {
          out.push_back(&style);
          return;
        }
  };
  for (const SegmentStyle& style : kPassStyles) add(style);
  add(kOtherStyle);
  add(kBubbleStyle);
  return out;
}

}  // namespace

std::string timeline_css() {
  std::string css;
  for (const SegmentStyle& s : kPassStyles) css += std::string(".") + s.css_class + "{fill:" + s.color + "}";
  for (const SegmentStyle* s : {&kOtherStyle, &kBubbleStyle}) css += std::string(".") + s->css_class + "{fill:" + s->color + "}";
  return css;
}

std::string timeline_section(const std::vector<StageLane>& lanes, double step_s) {
  std::vector<std::pair<std::string, std::string>> legend;
  for (const SegmentStyle* s : kinds_drawn(lanes)) legend.emplace_back(s->name, s->color);
  std::vector<Lane> drawn;
  std::size_t most = 0;
  for (const StageLane& lane : lanes) {
    drawn.push_back(timeline_lane(lane));
    most = std::max(most, lane.segments.size());
  }
  // About 3 px per segment of the fullest lane, so that passes stay apart; wider pages scroll.
  LaneChartStyle style = chart_style("timeline", "timeline of each pipeline stage's passes", "seconds", step_s,
                                     std::clamp(3.0 * static_cast<double>(most), 1000.0, 6000.0), lanes.size());
  style.bar_fraction = 0.8;
  return html_legend(legend) + "<div class=\"scroll\">" +
         svg_lane_chart(drawn, {{step_s, "step " + format_fixed(step_s, 4) + " s", "#000000"}}, style) + "</div>\n";
}

}  // namespace moesim::step_html_detail
