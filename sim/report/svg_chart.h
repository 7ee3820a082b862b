// A small self-contained SVG line chart for the HTML reports: axes with "nice" ticks (1, 2 or 5
// times a power of ten, or powers of two), one polyline and marker set per series (hollow markers
// for points flagged not filled), and a legend. No script, no external resource.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace moesim {

struct Series {  // one line of a chart
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;
  bool line = true;
  std::vector<bool> filled;  // per point; empty = all filled
};

// The text with &, <, > and " escaped for HTML and SVG.
std::string html_escape(const std::string& s);

// Ticks covering [lo, hi], about five of them.
std::vector<double> nice_ticks(double lo, double hi);

// An SVG element of the series; log2_x puts x on a base-2 axis (e.g. n = 1, 2, 4, 8).
std::string svg_chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<Series>& series, bool log2_x = false);

}  // namespace moesim
