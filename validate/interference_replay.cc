#include "validate/interference_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/engine/interference.h"
#include "validate/published.h"

namespace moesim::validate {
namespace {

// The held SMs the GEMM-size table stands for (the medians of the 8-, 16- and 32-CTA columns).
constexpr int kMinCtas = 8, kMaxCtas = 32;
constexpr std::uintmax_t kMaxProbeBytes = 4u << 20;  // a probe prints a few kB

[[noreturn]] void fail(const std::string& path, int line, const std::string& rule) {
  throw InputError(path + ":" + std::to_string(line) + ": " + rule);
}

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// A whole word as a number (`*` allowed at the end of a factor), or the rule it breaks.
double number(const std::string& path, int line, const std::string& word, const char* what, bool star = false) {
  std::string text = word;
  if (star && !text.empty() && text.back() == '*') text.pop_back();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) fail(path, line, std::string("expected ") + what + ", got '" + word + "'");
  return v;
}

std::int64_t dimension(const std::string& path, int line, const std::string& text) {
  const double v = number(path, line, text, "a GEMM dimension");
  if (v < 1 || v > 1e6 || v != std::floor(v))
    fail(path, line, "a GEMM dimension must be a whole number in [1, 1000000], got '" + text + "'");
  return static_cast<std::int64_t>(v);
}

// "MxNxK" into the shape.
void read_mnk(const std::string& path, int line, const std::string& text, ProbeShape& s) {
  const auto x1 = text.find('x');
  const auto x2 = x1 == std::string::npos ? x1 : text.find('x', x1 + 1);
  if (x2 == std::string::npos || text.find('x', x2 + 1) != std::string::npos)
    fail(path, line, "expected a GEMM shape MxNxK, got '" + text + "'");
  s.m = dimension(path, line, text.substr(0, x1));
  s.n = dimension(path, line, text.substr(x1 + 1, x2 - x1 - 1));
  s.k = dimension(path, line, text.substr(x2 + 1));
}

// The hold columns a header line names (`hold8`: 1 to 1024 CTAs), or none.
std::vector<int> hold_columns(const std::string& path, int line, const std::vector<std::string>& words) {
  std::vector<int> ctas;
  for (const std::string& w : words) {
    if (w.rfind("hold", 0) != 0 || w.size() <= 4 || w.find_first_not_of("0123456789", 4) != std::string::npos) continue;
    if (w.size() > 8 || std::stoi(w.substr(4)) < 1 || std::stoi(w.substr(4)) > 1024)
      fail(path, line, "a hold column names 1 to 1024 CTAs, got '" + w + "'");
    ctas.push_back(std::stoi(w.substr(4)));
  }
  return ctas;
}

ProbeShape read_data_line(const std::string& path, int line, const std::vector<std::string>& w,
                          const std::vector<int>& ctas) {
  ProbeShape s;
  s.file = path;
  s.line = line;
  std::size_t i = 0;
  if (w.size() > 2 && w[1] == "x") {  // "8 x 2048x768x2048": one batched launch
    s.batch = dimension(path, line, w[0]);
    i = 2;
  }
  read_mnk(path, line, w[i], s);
  s.name = s.batch > 1 ? w[0] + " x " + w[i] : w[i];
  const std::size_t first = i + 4;  // after the shape: launches, us per launch, TFLOP/s
  if (w.size() != first + ctas.size())
    fail(path, line, "expected the shape, launches, us, TFLOP/s and " + std::to_string(ctas.size()) +
                         " factors (the header's hold columns), got " + std::to_string(w.size()) + " words");
  for (std::size_t c = i + 1; c < first; ++c) number(path, line, w[c], "a number");
  for (std::size_t c = first; c < w.size(); ++c) {
    const double f = number(path, line, w[c], "a speed factor", true);
    if (!(f > 0 && f <= 2)) fail(path, line, "a speed factor must be in (0, 2], got '" + w[c] + "'");
    s.factors.push_back(f);
  }
  s.ctas = ctas;
  return s;
}


}  // namespace

std::vector<ProbeShape> read_probe_shapes(const std::string& path) {
  std::istringstream in(read_input_file(path, kMaxProbeBytes, "probe output (moesim_sm_share_probe)"));
  std::vector<ProbeShape> shapes;
  std::vector<int> ctas;
  int line = 0;
  for (std::string text; std::getline(in, text);) {
    ++line;
    const std::vector<std::string> w = words_of(text);
    if (w.empty()) continue;
    if (w[0].rfind("rc=", 0) == 0) {  // the exit code the session scripts append
      if (w[0] != "rc=0") fail(path, line, "the probe exited with " + w[0] + ": its output is not a measurement");
      continue;
    }
    if (w[0][0] == '#') {
      if (std::vector<int> c = hold_columns(path, line, w); !c.empty()) ctas = c;
      continue;
    }
    if (ctas.empty()) fail(path, line, "a data line before the header naming the hold columns (# ... hold8 hold32)");
    shapes.push_back(read_data_line(path, line, w, ctas));
  }
  if (shapes.empty()) throw InputError(path + ": no GEMM shape in the file (moesim_sm_share_probe's output)");
  return shapes;
}

InterferenceReplay replay_interference(const std::vector<ProbeShape>& shapes, const ClusterSpec& node) {
  const InterferenceTable& t = node.node.interference;
  if (t.gemm_with_communication.empty()) {
    const std::string& file = node.node.origin.file;
    throw InputError("--hardware: " + (file.empty() ? node.name : file + " (" + node.name + ")") +
                     " has no interference.gemm_with_communication table to replay the probe against");
  }
  InterferenceReplay r{node.name, node.node.gpu.sm_count, {}};
  for (const ProbeShape& s : shapes) {
    std::vector<double> in_range;
    for (std::size_t c = 0; c < s.ctas.size(); ++c)
      if (s.ctas[c] >= kMinCtas && s.ctas[c] <= kMaxCtas) in_range.push_back(s.factors[c]);
    if (in_range.empty())
      fail(s.file, s.line, "no factor at 8 to 32 held CTAs, the range the GEMM-size table stands for");
    InterferencePoint p;
    p.shape = s;
    p.outputs_per_sm = static_cast<double>(s.batch * s.m * s.n) / r.sm_count;
    p.measured = median(in_range);
    p.measured_min = *std::min_element(in_range.begin(), in_range.end());
    p.measured_max = *std::max_element(in_range.begin(), in_range.end());
    p.table = gemm_with_communication(t.gemm_with_communication, p.outputs_per_sm);
    p.cell = t.factors[static_cast<std::size_t>(InterferenceClass::kComputation)][0];
    r.points.push_back(p);
  }
  return r;
}

namespace {

void print_summary(const InterferenceReplay& r, std::ostream& out) {
  auto line = [&](const char* what, auto model) {
    std::vector<double> diffs;
    const InterferencePoint* worst = nullptr;
    for (const InterferencePoint& p : r.points) {
      diffs.push_back(std::fabs(model(p) - p.measured));
      if (worst == nullptr || diffs.back() > std::fabs(model(*worst) - worst->measured)) worst = &p;
    }
    char text[200];
    std::snprintf(text, sizeof text, "%-6s median |model - measured| %.3f, worst %+.3f (%s) over %zu shape(s)\n", what,
                  median(diffs), model(*worst) - worst->measured, worst->shape.name.c_str(), r.points.size());
    out << text;
  };
  line("table", [](const InterferencePoint& p) { return p.table; });
  line("cell", [](const InterferencePoint& p) { return p.cell; });
}

}  // namespace

void print_interference_replay(const InterferenceReplay& r, std::ostream& out) {
  out << "GEMMs beside communication on " << r.node << " (" << r.sm_count
      << " SMs): measured speed over speed alone (median of the 8-32 held-CTA columns) against the node's\n"
         "GEMM-size table (interference.gemm_with_communication) and its computation.with_communication cell\n";
  std::string file;
  for (const InterferencePoint& p : r.points) {
    if (p.shape.file != file) {
      file = p.shape.file;
      out << "\n" << file << "\n  shape                   outputs/SM  measured  (range)         table    diff    cell    diff\n";
    }
    char text[240];
    std::snprintf(text, sizeof text, "  %-22s %11.0f  %8.3f  (%.3f-%.3f)  %7.3f  %+6.3f  %6.3f  %+6.3f\n",
                  p.shape.name.c_str(), p.outputs_per_sm, p.measured, p.measured_min, p.measured_max, p.table,
                  p.table - p.measured, p.cell, p.cell - p.measured);
    out << text;
  }
  out << "\n";
  print_summary(r, out);
}

// A CSV text cell: quoted, its quotes doubled, when it holds a comma, a quote or a line break.
std::string csv_text(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void write_interference_replay_csv(const InterferenceReplay& r, std::ostream& out) {
  out << "node,file,line,shape,batch,m,n,k,outputs_per_sm,measured,measured_min,measured_max,table,cell\n";
  for (const InterferencePoint& p : r.points) {
    char numbers[200];
    std::snprintf(numbers, sizeof numbers, "%.1f,%.4f,%.4f,%.4f,%.4f,%.4f", p.outputs_per_sm, p.measured,
                  p.measured_min, p.measured_max, p.table, p.cell);
    out << csv_text(r.node) << ',' << csv_text(p.shape.file) << ',' << p.shape.line << ',' << csv_text(p.shape.name)
        << ',' << p.shape.batch << ',' << p.shape.m << ',' << p.shape.n << ',' << p.shape.k << ',' << numbers << '\n';
  }
}

}  // namespace moesim::validate
