// A small self-contained SVG chart for the HTML reports: axes with "nice" ticks (1, 2 or 5 times a
// power of ten, or powers of two), per series a polyline and markers (hollow where a point is flagged
// not filled, faded for points in the background, outlined for the ones to look at), a tooltip per
// marker as an SVG <title>, and a legend below the plot that wraps into rows and widens the chart
// rather than cutting a name. No script, no external resource; numbers have fixed decimals.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace moesim {

struct ChartPoint {
  double x = 0;
  double y = 0;
  bool filled = true;   // false: drawn hollow (e.g. the configuration does not fit)
  std::string tooltip;  // shown by the browser on hover; empty for none
};

struct Series {  // one line or set of markers of a chart
  std::string name;   // series of one name and colour share a legend entry
  std::string color;
  std::vector<ChartPoint> points;
  bool line = true;       // join the points in the order given
  bool markers = true;
  bool faded = false;     // light and behind the others: context, e.g. dominated configurations
  bool emphasis = false;  // larger, dark-outlined markers on top: e.g. the Pareto front, a best pick
  bool dashed = false;
  bool in_legend = true;
};

struct ChartStyle {
  std::string plot;   // the data-plot attribute: which view of the report the chart draws
  std::string label;  // aria-label: what the chart shows, for screen readers
  double width = 600;
  double height = 330;  // the axes' box; legend rows add to it
  bool log2_x = false;  // x on a base-2 axis (e.g. n = 1, 2, 4, 8 or GPU counts)
  bool y_from_zero = true;
  bool legend = true;
};

// The text with &, <, > and " escaped for HTML and SVG.
std::string html_escape(const std::string& s);

// Ticks covering [lo, hi], about five of them.
std::vector<double> nice_ticks(double lo, double hi);
// The same with their labels, as many decimals as the step between them needs (0.5, 1.0, 1.5).
std::vector<std::pair<double, std::string>> labelled_ticks(double lo, double hi);

// The CSS the HTML reports share (page, headings, tables, notes, legends), for their <style>.
const char* html_report_style();
// An HTML legend: a coloured square and the name of each (name, colour); it wraps, never cuts.
std::string html_legend(const std::vector<std::pair<std::string, std::string>>& entries);

// The i-th of ten distinguishable colours; series past the tenth repeat them dashed.
const char* palette_color(std::size_t i);
bool palette_dashed(std::size_t i);

// An SVG element drawing the series.
std::string svg_chart(const std::string& xlabel, const std::string& ylabel, const std::vector<Series>& series,
                      const ChartStyle& style);

}  // namespace moesim
