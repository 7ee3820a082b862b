// A horizontal lane chart for the HTML reports: one lane (row) per item, each holding bars laid on
// a shared x axis from 0, vertical markers across all lanes (a step time, a memory capacity), a
// tooltip per bar and per lane label as an SVG <title>. It draws both stacked bars (bars end to
// end from 0) and timelines (bars where they happened). No script, no external resource; numbers
// have fixed decimals, so the output is deterministic.
//
// Bar edges are rounded to the pixel grid's 0.1 before the width is taken, so bars that touch in
// data touch in the drawing and never overlap; a bar narrower than 0.05 px is not drawn.
#pragma once

#include <string>
#include <vector>

namespace moesim {

struct LaneBar {
  double start = 0;
  double end = 0;
  std::string fill;       // a colour, or:
  std::string css_class;  // a class the page's CSS colours (fewer bytes for thousands of bars)
  std::string text;       // written inside the bar where it fits
  std::string tooltip;
};

struct Lane {
  std::string label;  // left of the lane
  std::string tooltip;
  std::string tag;    // the lane group's data-lane attribute (e.g. the stage number)
  std::vector<LaneBar> bars;
};

struct LaneMarker {
  double x = 0;
  std::string label;  // above the lanes
  std::string color;
};

struct LaneChartStyle {
  std::string plot;   // the data-plot attribute
  std::string label;  // aria-label
  std::string xlabel;
  double x_max = 1;          // the axis covers [0, x_max] at least
  double plot_width = 800;   // the lanes' width in px, without the labels
  double lane_height = 18;
  double bar_fraction = 0.75;  // of the lane height a bar fills
};

// The lane height for `lanes` lanes: 22 px for a few, down to 11 px at 44 and more, so that 64
// pipeline stages stay on a screen and their labels readable.
double lane_height_for(std::size_t lanes);

std::string svg_lane_chart(const std::vector<Lane>& lanes, const std::vector<LaneMarker>& markers,
                           const LaneChartStyle& style);

}  // namespace moesim
