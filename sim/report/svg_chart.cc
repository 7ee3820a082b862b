#include "sim/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "sim/report/plan_report.h"

namespace moesim {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  // From the multiple of step at or below lo up to the first one at or above hi, so every point lies
  // inside the axes.
  std::vector<double> ticks;
  const double first = std::floor(lo / step);
  for (double k = first; ticks.empty() || ticks.back() < hi - step * 1e-9; k += 1) ticks.push_back(k * step);
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr std::size_t kColors = std::size(kPalette);

// Text is laid out before any browser measures it: this is a generous width of one character of
// the 11 px sans-serif the charts use (DejaVu Sans digits are 7.0 px, capitals up to 9.5 px).
constexpr double kCharWidth = 7.2;
constexpr double kLegendRow = 16;

double text_width(const std::string& s) { return kCharWidth * static_cast<double>(s.size()); }

std::string fixed1(double v) { return format_fixed(v, 1); }

// Labels with as many decimals as the step between ticks needs (0.5, 1.0, 1.5; 0.25, 0.50).
using Ticks = std::vector<std::pair<double, std::string>>;
Ticks labelled(const std::vector<double>& values) {
  const double step = values.size() > 1 ? values[1] - values[0] : 1;
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  Ticks out;
  for (double v : values) out.emplace_back(v, format_fixed(v, decimals));
  return out;
}

// Where data lands in the SVG: the axes' box and the value ranges it spans.
struct Frame {
  double left = 56, top = 12, pw = 0, ph = 0;
  double xa = 0, xb = 1, ya = 0, yb = 1;
  bool log2_x = false;
  double fx(double x) const { return log2_x ? std::log2(x) : x; }
  double px(double x) const { return left + (fx(x) - xa) / (xb - xa) * pw; }
  double py(double y) const { return top + ph - (y - ya) / (yb - ya) * ph; }
};
constexpr double kRightMargin = 16, kBottomMargin = 40;

// Every n-th tick keeps the labels of an axis from running into each other.
Ticks spaced(const Ticks& ticks, double length) {
  if (ticks.size() < 2) return ticks;
  double widest = 0;
  for (const auto& t : ticks) widest = std::max(widest, text_width(t.second));
  const double gap = length / static_cast<double>(ticks.size() - 1);
  const auto every = static_cast<std::size_t>(std::ceil((widest + 8) / gap));
  if (every <= 1) return ticks;
  Ticks out;
  for (std::size_t i = 0; i < ticks.size(); i += every) out.push_back(ticks[i]);
  return out;
}

void write_axes(std::ostringstream& o, const Frame& f, const Ticks& xt, const Ticks& yt, const std::string& xlabel,
                const std::string& ylabel) {
  o << "<rect x=\"" << fixed1(f.left) << "\" y=\"" << fixed1(f.top) << "\" width=\"" << fixed1(f.pw)
    << "\" height=\"" << fixed1(f.ph) << "\" fill=\"#fafafa\" stroke=\"#999\"/>\n";
  for (const auto& [v, text] : spaced(xt, f.pw)) {
    const std::string x = fixed1(f.left + (v - f.xa) / (f.xb - f.xa) * f.pw);
    o << "<line x1=\"" << x << "\" y1=\"" << fixed1(f.top) << "\" x2=\"" << x << "\" y2=\"" << fixed1(f.top + f.ph)
      << "\" stroke=\"#e4e4e4\"/><text x=\"" << x << "\" y=\"" << fixed1(f.top + f.ph + 14)
      << "\" text-anchor=\"middle\">" << text << "</text>\n";
  }
  for (const auto& [v, text] : yt) {
    const double y = f.py(v);
    o << "<line x1=\"" << fixed1(f.left) << "\" y1=\"" << fixed1(y) << "\" x2=\"" << fixed1(f.left + f.pw)
      << "\" y2=\"" << fixed1(y) << "\" stroke=\"#e4e4e4\"/><text x=\"" << fixed1(f.left - 5) << "\" y=\""
      << fixed1(y + 4) << "\" text-anchor=\"end\">" << text << "</text>\n";
  }
  o << "<text x=\"" << fixed1(f.left + f.pw / 2) << "\" y=\"" << fixed1(f.top + f.ph + 32)
    << "\" text-anchor=\"middle\">" << html_escape(xlabel) << "</text>\n";
  o << "<text transform=\"translate(13," << fixed1(f.top + f.ph / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
    << html_escape(ylabel) << "</text>\n";
}

void write_line(std::ostringstream& o, const Frame& f, const Series& s) {
  if (!s.line || s.points.size() < 2) return;
  o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.6\""
    << (s.dashed ? " stroke-dasharray=\"5 3\"" : "") << (s.faded ? " stroke-opacity=\"0.3\"" : "") << " points=\"";
  for (const ChartPoint& p : s.points) o << fixed1(f.px(p.x)) << "," << fixed1(f.py(p.y)) << " ";
  o << "\"/>\n";
}

void write_markers(std::ostringstream& o, const Frame& f, const Series& s) {
  if (!s.markers) return;
  const char* radius = s.emphasis ? "4.5" : s.faded ? "2.5" : "3";
  for (const ChartPoint& p : s.points) {
    o << "<circle cx=\"" << fixed1(f.px(p.x)) << "\" cy=\"" << fixed1(f.py(p.y)) << "\" r=\"" << radius
      << "\" fill=\"" << (p.filled ? s.color : "white") << "\" stroke=\"" << (s.emphasis ? "#000" : s.color) << "\"";
    if (s.emphasis) o << " stroke-width=\"1.5\"";
    if (s.faded) o << " fill-opacity=\"0.3\" stroke-opacity=\"0.3\"";
    if (p.tooltip.empty()) {
      o << "/>";
    } else {
      o << "><title>" << html_escape(p.tooltip) << "</title></circle>";
    }
  }
  o << "\n";
}

// A legend entry: each (name, colour) once, in the order the series come.
struct LegendEntry {
  const Series* series;
  double x = 0, y = 0;
};

std::vector<LegendEntry> legend_entries(const std::vector<Series>& series) {
  std::vector<LegendEntry> out;
  for (const Series& s : series) {
    if (!s.in_legend || s.points.empty()) continue;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const LegendEntry& e) {
      return e.series->name == s.name && e.series->color == s.color;
    });
    if (!seen) out.push_back({&s});
  }
  return out;
}

double legend_entry_width(const LegendEntry& e) { return 24 + text_width(e.series->name); }

// Places the entries in rows below the axes; returns the number of rows.
int lay_out_legend(std::vector<LegendEntry>& entries, double width, double top) {
  constexpr double kLeft = 8, kGap = 14;
  double x = kLeft;
  int rows = entries.empty() ? 0 : 1;
  for (LegendEntry& e : entries) {
    if (x > kLeft && x + legend_entry_width(e) > width - kLeft) {
      x = kLeft;
      ++rows;
    }
    e.x = x;
    e.y = top + kLegendRow * (rows - 1);
    x += legend_entry_width(e) + kGap;
  }
  return rows;
}

void write_legend(std::ostringstream& o, const std::vector<LegendEntry>& entries) {
  for (const LegendEntry& e : entries) {
    const Series& s = *e.series;
    const std::string mid = fixed1(e.y + 6);
    if (s.line) {
      o << "<line x1=\"" << fixed1(e.x) << "\" y1=\"" << mid << "\" x2=\"" << fixed1(e.x + 18) << "\" y2=\"" << mid
        << "\" stroke=\"" << s.color << "\" stroke-width=\"2\"" << (s.dashed ? " stroke-dasharray=\"5 3\"" : "")
        << "/>";
    }
    if (s.markers) {
      o << "<circle cx=\"" << fixed1(e.x + 9) << "\" cy=\"" << mid << "\" r=\"3.5\" fill=\"" << s.color << "\"/>";
    }
    o << "<text x=\"" << fixed1(e.x + 24) << "\" y=\"" << fixed1(e.y + 10) << "\">" << html_escape(s.name)
      << "</text>\n";
  }
}

// The axes' ranges and ticks from the data, padded so that no marker sits on the frame; false when
// there is nothing to draw. A base-2 axis has its ticks at the data's own x values.
bool fit_frame(const std::vector<Series>& series, const ChartStyle& style, Frame& f, Ticks& xt, Ticks& yt) {
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  std::vector<double> xs;
  f.log2_x = style.log2_x;
  for (const Series& s : series) {
    for (const ChartPoint& p : s.points) {
      x0 = std::min(x0, f.fx(p.x));
      x1 = std::max(x1, f.fx(p.x));
      y0 = std::min(y0, p.y);
      y1 = std::max(y1, p.y);
      xs.push_back(p.x);
    }
  }
  if (x0 > x1) return false;
  if (style.log2_x) {
    const double pad = std::max(0.3, 0.05 * (x1 - x0));
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    for (double x : xs) xt.emplace_back(f.fx(x), format_fixed(x, x == std::floor(x) ? 0 : 2));
    f.xa = x0 - pad;
    f.xb = x1 + pad;
  } else {
    const double pad = 0.03 * (x1 - x0);
    xt = labelled(nice_ticks(x0 - pad, x1 + pad));
    f.xa = xt.front().first;
    f.xb = xt.back().first;
  }
  const double ypad = 0.04 * (y1 - y0);
  yt = labelled(nice_ticks(style.y_from_zero ? std::min(0.0, y0) : y0 - ypad, y1 + ypad));
  f.ya = yt.front().first;
  f.yb = yt.back().first;
  return true;
}

}  // namespace

const char* palette_color(std::size_t i) { return kPalette[i % kColors]; }

std::vector<std::pair<double, std::string>> labelled_ticks(double lo, double hi) { return labelled(nice_ticks(lo, hi)); }

const char* html_report_style() {
  return "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}"
         "h1{font-size:22px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ccc}"
         ".grid{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}"
         "figure.plot{margin:0;width:min-content}figcaption{font-size:12px;font-weight:bold;margin-bottom:2px}"
         "table{border-collapse:collapse;font-size:12px}"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}"
         "td.l{text-align:left}.note{color:#555;font-size:12px;max-width:1000px}"
         ".legend{font-size:12px;margin:6px 0}.legend span{margin-right:14px;white-space:nowrap}"
         ".legend i{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px}";
}

std::string html_legend(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string s = "<div class=\"legend\">";
  for (const auto& [name, colour] : entries)
    s += "<span><i style=\"background:" + colour + "\"></i>" + html_escape(name) + "</span>";
  return s + "</div>\n";
}
bool palette_dashed(std::size_t i) { return (i / kColors) % 2 == 1; }

std::string svg_chart(const std::string& xlabel, const std::string& ylabel, const std::vector<Series>& series,
                      const ChartStyle& style) {
  Frame f;
  std::vector<LegendEntry> legend = style.legend ? legend_entries(series) : std::vector<LegendEntry>{};
  // A name wider than the chart widens the chart: a legend is never cut.
  double width = style.width;
  for (const LegendEntry& e : legend) width = std::max(width, legend_entry_width(e) + 16);
  f.pw = width - f.left - kRightMargin;
  f.ph = style.height - f.top - kBottomMargin;
  const int rows = lay_out_legend(legend, width, style.height);
  const double height = style.height + kLegendRow * rows + (rows > 0 ? 6 : 0);
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" data-plot=\"" << html_escape(style.plot) << "\" role=\"img\" aria-label=\""
    << html_escape(style.label) << "\" width=\"" << fixed1(width) << "\" height=\"" << fixed1(height)
    << "\" viewBox=\"0 0 " << fixed1(width) << " " << fixed1(height)
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  Ticks xt, yt;
  if (!fit_frame(series, style, f, xt, yt)) {
    o << "<text x=\"" << fixed1(f.left) << "\" y=\"" << fixed1(f.top + 20) << "\">no data</text></svg>\n";
    return o.str();
  }
  write_axes(o, f, xt, yt, xlabel, ylabel);
  // Faded markers behind the lines, outlined ones on top.
  for (const Series& s : series) {
    if (s.faded) write_markers(o, f, s);
  }
  for (const Series& s : series) write_line(o, f, s);
  for (const Series& s : series) {
    if (!s.faded && !s.emphasis) write_markers(o, f, s);
  }
  for (const Series& s : series) {
    if (s.emphasis) write_markers(o, f, s);
  }
  write_legend(o, legend);
  o << "</svg>\n";
  return o.str();
}

}  // namespace moesim
