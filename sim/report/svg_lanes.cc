#include "sim/report/svg_lanes.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/report/plan_report.h"
#include "sim/report/svg_chart.h"

namespace moesim {
namespace {

// As svg_chart: a generous width of one character of the 11 px sans-serif the charts use.
constexpr double kCharWidth = 7.2;
constexpr double kTop = 22;       // room for the markers' labels
constexpr double kAxisBelow = 38; // tick labels and the axis label
constexpr double kRightMargin = 24;

std::string px(double v) { return format_fixed(v, 1); }
double grid(double v) { return std::round(v * 10) / 10; }

struct LaneFrame {
  double left = 0, width = 0, x_end = 1;
  double x(double value) const { return grid(left + value / x_end * width); }
};

double label_width(const std::vector<Lane>& lanes) {
  std::size_t widest = 0;
  for (const Lane& l : lanes) widest = std::max(widest, l.label.size());
  return kCharWidth * static_cast<double>(widest) + 12;
}

void write_x_axis(std::ostringstream& o, const LaneFrame& f, const std::vector<std::pair<double, std::string>>& ticks,
                  double bottom, const std::string& xlabel) {
  // Every n-th tick, so that the labels keep apart.
  std::size_t widest = 0;
  for (const auto& t : ticks) widest = std::max(widest, t.second.size());
  const double gap = ticks.size() > 1 ? f.width / static_cast<double>(ticks.size() - 1) : f.width;
  const auto every = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil((kCharWidth * widest + 8) / gap)));
  for (std::size_t i = 0; i < ticks.size(); i += every) {
    const std::string x = px(f.x(ticks[i].first));
    o << "<line x1=\"" << x << "\" y1=\"" << px(kTop) << "\" x2=\"" << x << "\" y2=\"" << px(bottom)
      << "\" stroke=\"#e4e4e4\"/><text x=\"" << x << "\" y=\"" << px(bottom + 14) << "\" text-anchor=\"middle\">"
      << ticks[i].second << "</text>\n";
  }
  o << "<text x=\"" << px(f.left + f.width / 2) << "\" y=\"" << px(bottom + 32) << "\" text-anchor=\"middle\">"
    << html_escape(xlabel) << "</text>\n";
}

void write_bar(std::ostringstream& o, const LaneFrame& f, const LaneBar& b, double height, double y) {
  const double x0 = f.x(b.start), x1 = f.x(b.end);
  if (x1 - x0 < 0.05) return;
  o << "<rect x=\"" << px(x0) << "\" y=\"" << px(y) << "\" width=\"" << px(x1 - x0) << "\" height=\"" << px(height)
    << "\"";
  if (!b.css_class.empty()) o << " class=\"" << b.css_class << "\"";
  if (!b.fill.empty()) o << " fill=\"" << b.fill << "\"";
  if (b.tooltip.empty()) {
    o << "/>";
  } else {
    o << "><title>" << html_escape(b.tooltip) << "</title></rect>";
  }
  if (!b.text.empty() && x1 - x0 >= kCharWidth * static_cast<double>(b.text.size()) + 4)
    o << "<text x=\"" << px((x0 + x1) / 2) << "\" y=\"" << px(y + height / 2 + 4)
      << "\" text-anchor=\"middle\" fill=\"#fff\" pointer-events=\"none\">" << html_escape(b.text) << "</text>";
  o << "\n";
}

void write_lane(std::ostringstream& o, const LaneFrame& f, const Lane& lane, double top, const LaneChartStyle& style) {
  const double bar_height = style.lane_height * style.bar_fraction;
  const double bar_y = (style.lane_height - bar_height) / 2;
  o << "<g data-lane=\"" << html_escape(lane.tag) << "\" transform=\"translate(0," << px(top) << ")\">\n";
  o << "<text x=\"" << px(f.left - 6) << "\" y=\"" << px(style.lane_height / 2 + 4) << "\" text-anchor=\"end\">"
    << html_escape(lane.label);
  if (!lane.tooltip.empty()) o << "<title>" << html_escape(lane.tooltip) << "</title>";
  o << "</text>\n";
  for (const LaneBar& b : lane.bars) write_bar(o, f, b, bar_height, bar_y);
  o << "</g>\n";
}

// Labels alternate sides of their line, the first on the left, so that two close markers (a
// capacity and the capacity less a reserve) do not write over each other.
bool label_on_right(std::size_t index) { return index % 2 == 1; }

void write_marker(std::ostringstream& o, const LaneFrame& f, const LaneMarker& m, double bottom, std::size_t index) {
  const std::string x = px(f.x(m.x));
  o << "<line x1=\"" << x << "\" y1=\"" << px(kTop - 4) << "\" x2=\"" << x << "\" y2=\"" << px(bottom)
    << "\" stroke=\"" << m.color << "\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>";
  const bool right = label_on_right(index);
  o << "<text x=\"" << px(f.x(m.x) + (right ? 3 : -3)) << "\" y=\"" << px(kTop - 8) << "\" text-anchor=\""
    << (right ? "start" : "end") << "\" fill=\"" << m.color << "\">" << html_escape(m.label) << "</text>\n";
}

}  // namespace

double lane_height_for(std::size_t lanes) {
  return std::clamp(480.0 / static_cast<double>(std::max<std::size_t>(lanes, 1)), 11.0, 22.0);
}

std::string svg_lane_chart(const std::vector<Lane>& lanes, const std::vector<LaneMarker>& markers,
                           const LaneChartStyle& style) {
  const auto ticks = labelled_ticks(0, style.x_max > 0 ? style.x_max : 1);
  LaneFrame f;
  f.left = label_width(lanes);
  f.width = style.plot_width;
  f.x_end = ticks.back().first;
  // A marker's label reaching past the plot widens the chart: nothing is cut.
  double width = f.left + f.width + kRightMargin;
  for (std::size_t i = 0; i < markers.size(); ++i)
    if (label_on_right(i))
      width = std::max(width, f.x(markers[i].x) + 3 + kCharWidth * static_cast<double>(markers[i].label.size()) + 4);
  const double bottom = kTop + style.lane_height * static_cast<double>(lanes.size());
  const double height = bottom + kAxisBelow + 4;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" data-plot=\"" << html_escape(style.plot)
    << "\" role=\"img\" aria-label=\"" << html_escape(style.label) << "\" width=\"" << px(width) << "\" height=\""
    << px(height) << "\" viewBox=\"0 0 " << px(width) << " " << px(height)
    << "\" font-family=\"sans-serif\" font-size=\"" << (style.lane_height < 14 ? "10" : "11") << "\">\n";
  o << "<rect x=\"" << px(f.left) << "\" y=\"" << px(kTop) << "\" width=\"" << px(f.width) << "\" height=\""
    << px(bottom - kTop) << "\" fill=\"#fafafa\" stroke=\"#999\"/>\n";
  write_x_axis(o, f, ticks, bottom, style.xlabel);
  for (std::size_t i = 0; i < lanes.size(); ++i)
    write_lane(o, f, lanes[i], kTop + style.lane_height * static_cast<double>(i), style);
  for (std::size_t i = 0; i < markers.size(); ++i) write_marker(o, f, markers[i], bottom, i);
  o << "</svg>\n";
  return o.str();
}

}  // namespace moesim
