#include "sim/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <sstream>

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

std::string tick_label(double v) {
  if (std::fabs(v) >= 100 || v == std::floor(v)) return format_fixed(v, 0);
  if (std::fabs(v) >= 1) return format_fixed(v, 1);
  return format_fixed(v, 3);
}

}  // namespace

std::string svg_chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<Series>& series, bool log2_x) {
  const double w = 600, h = 330, left = 64, right = 190, top = 34, bottom = 48;
  const double pw = w - left - right, ph = h - top - bottom;
  double x0 = 1e300, x1 = -1e300, y0 = 0, y1 = -1e300;
  const auto fx = [log2_x](double x) { return log2_x ? std::log2(x) : x; };
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, fx(x));
      x1 = std::max(x1, fx(x));
      y1 = std::max(y1, y);
    }
  }
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" viewBox=\"0 0 " << w
    << " " << h << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<text x=\"" << w / 2 - right / 2 << "\" y=\"18\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">"
    << html_escape(title) << "</text>\n";
  if (x0 > x1) {
    o << "<text x=\"" << left << "\" y=\"" << top + 20 << "\">no data</text></svg>\n";
    return o.str();
  }
  std::vector<double> xt;
  if (log2_x) {
    for (double v = std::floor(x0); v <= std::ceil(x1); v += 1) xt.push_back(v);
  } else {
    xt = nice_ticks(x0, x1);
  }
  const std::vector<double> yt = nice_ticks(y0, y1);
  const double xa = xt.front(), xb = xt.back() > xt.front() ? xt.back() : xt.front() + 1;
  const double ya = yt.front(), yb = yt.back();
  const auto px = [&](double x) { return left + (fx(x) - xa) / (xb - xa) * pw; };
  const auto py = [&](double y) { return top + ph - (y - ya) / (yb - ya) * ph; };
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"#fafafa\" stroke=\"#999\"/>\n";
  for (double v : xt) {
    const double x = left + (v - xa) / (xb - xa) * pw;
    o << "<line x1=\"" << format_fixed(x, 1) << "\" y1=\"" << top << "\" x2=\"" << format_fixed(x, 1) << "\" y2=\""
      << top + ph << "\" stroke=\"#e4e4e4\"/>";
    o << "<text x=\"" << format_fixed(x, 1) << "\" y=\"" << top + ph + 14 << "\" text-anchor=\"middle\">"
      << (log2_x ? tick_label(std::exp2(v)) : tick_label(v)) << "</text>\n";
  }
  for (double v : yt) {
    const double y = py(v);
    o << "<line x1=\"" << left << "\" y1=\"" << format_fixed(y, 1) << "\" x2=\"" << left + pw << "\" y2=\""
      << format_fixed(y, 1) << "\" stroke=\"#e4e4e4\"/>";
    o << "<text x=\"" << left - 6 << "\" y=\"" << format_fixed(y + 4, 1) << "\" text-anchor=\"end\">" << tick_label(v)
      << "</text>\n";
  }
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << h - 10 << "\" text-anchor=\"middle\">" << html_escape(xlabel)
    << "</text>\n";
  o << "<text transform=\"translate(16," << top + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << html_escape(ylabel) << "</text>\n";
  for (std::size_t si = 0; si < series.size(); ++si) {
    const Series& s = series[si];
    if (s.line && s.points.size() > 1) {
      o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.8\" points=\"";
      for (const auto& [x, y] : s.points) o << format_fixed(px(x), 1) << "," << format_fixed(py(y), 1) << " ";
      o << "\"/>\n";
    }
    for (std::size_t i = 0; i < s.points.size(); ++i) {
      const bool filled = s.filled.empty() || s.filled[i];
      o << "<circle cx=\"" << format_fixed(px(s.points[i].first), 1) << "\" cy=\""
        << format_fixed(py(s.points[i].second), 1) << "\" r=\"3\" fill=\"" << (filled ? s.color : "white")
        << "\" stroke=\"" << s.color << "\"/>";
    }
    o << "\n";
    const double ly = top + 8 + 16 * static_cast<double>(si);
    o << "<rect x=\"" << left + pw + 10 << "\" y=\"" << ly - 8 << "\" width=\"10\" height=\"10\" fill=\"" << s.color
      << "\"/><text x=\"" << left + pw + 24 << "\" y=\"" << ly + 1 << "\">" << html_escape(s.name) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace moesim
