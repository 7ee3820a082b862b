// The text and CSV of `moesim validate steps` (validate/step_replay.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "validate/step_replay.h"

namespace moesim::validate {

namespace {

std::string format(const char* fmt, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

const char* unit(StepMeasure m) {
  switch (m) {
    case StepMeasure::kIterationTime: return "s";
    case StepMeasure::kTflopsPerGpu: return "TF/s";
    case StepMeasure::kTokensPerSPerGpu: return "tok/s";
  }
  return "";
}

const char* value_format(StepMeasure m) {
  return m == StepMeasure::kIterationTime ? "%.3f" : m == StepMeasure::kTflopsPerGpu ? "%.1f" : "%.0f";
}

// The columns a dataset's table shows: the model names' width, and ep, cp and precision where a
// row uses them (MoE datasets; the dense ones print as before).
struct Columns {
  int model_width = 10;
  bool moe = false;
};

Columns columns_of(const StepDatasetReport& r) {
  Columns c;
  for (const StepComparison& s : r.rows) {
    c.model_width = std::max(c.model_width, static_cast<int>(s.row.model.size()));
    c.moe = c.moe || s.row.ep > 1 || s.row.cp > 1 || s.row.fp8 || !s.row.part_layers.empty();
  }
  return c;
}

std::string layout_cells(const StepRow& r, const Columns& k) {
  char buf[200];
  const std::string mbs = r.micro_batch > 0 ? std::to_string(r.micro_batch) : "-";
  std::snprintf(buf, sizeof buf, "%5d %-*s %5d %3d %3d %3d %4d %5lld %3s %-9s %-3s", r.line, k.model_width, r.model.c_str(), r.gpus,
                r.tp, r.pp, r.vpp, r.gpus / (r.tp * r.cp * r.pp), static_cast<long long>(r.global_batch), mbs.c_str(),
                r.recompute ? std::string(to_string(*r.recompute)).c_str() : "-", r.sequence_parallel ? "yes" : "no");
  std::string cells = buf;
  if (k.moe) {
    std::snprintf(buf, sizeof buf, " %3d %3d %-4s", r.ep, r.cp, !r.precision_stated ? "-" : r.fp8 ? "fp8" : "bf16");
    cells += buf;
  }
  return cells;
}

void print_rows(const StepDatasetReport& r, std::ostream& out) {
  const Columns k = columns_of(r);
  char line[320];
  std::snprintf(line, sizeof line, "   %5s %-*s %5s %3s %3s %3s %4s %5s %3s %-9s %-3s", "line", k.model_width, "model", "GPUs", "tp",
                "pp", "vpp", "dp", "GBS", "mbs", "recompute", "SP");
  out << line;
  if (k.moe) {
    std::snprintf(line, sizeof line, " %3s %3s %-4s", "ep", "cp", "prec");
    out << line;
  }
  std::snprintf(line, sizeof line, " %9s %9s %8s %9s %4s\n", (std::string("meas ") + unit(r.dataset.measure)).c_str(),
                (std::string("sim ") + unit(r.dataset.measure)).c_str(), "error", "sim step", "fits");
  out << line;
  for (const StepComparison& c : r.rows) {
    out << "   " << layout_cells(c.row, k);
    char measured[32];
    std::snprintf(measured, sizeof measured, "%9s", c.row.measured ? c.row.measured_text.c_str() : "-");
    if (!c.not_simulated.empty()) {
      out << " " << measured << "  not simulated: " << c.not_simulated << "\n";
      continue;
    }
    std::snprintf(line, sizeof line, " %s %9s %8s %8.3fs %4s\n", measured, format(value_format(r.dataset.measure), c.simulated).c_str(),
                  format("%+.1f%%", 100 * c.error()).c_str(), c.simulated_step_s, c.fits ? "yes" : "no");
    out << line;
  }
}

void print_speedups(const StepDatasetReport& r, std::ostream& out) {
  if (r.speedups.empty()) return;
  out << "   speed-up of selective recomputation + sequence parallelism over full recomputation (throughput):\n";
  char line[256];
  std::snprintf(line, sizeof line, "   %-10s %5s %-9s %9s %9s %8s\n", "model", "GPUs", "lines", "measured", "moesim", "points");
  out << line;
  for (const SpeedupComparison& s : r.speedups) {
    const std::string lines = std::to_string(s.full_line) + "," + std::to_string(s.selective_line);
    const std::string measured = format("%.1f%%", s.measured_pct) + (s.measured_published ? "" : "*");
    if (!s.not_evaluated.empty()) {
      std::snprintf(line, sizeof line, "   %-10s %5d %-9s %9s  not compared: %s\n", s.model.c_str(), s.gpus, lines.c_str(),
                    s.measured_published ? measured.c_str() : "-", s.not_evaluated.c_str());
    } else {
      std::snprintf(line, sizeof line, "   %-10s %5d %-9s %9s %8.1f%% %+8.1f\n", s.model.c_str(), s.gpus, lines.c_str(),
                    measured.c_str(), s.simulated_pct, s.points());
    }
    out << line;
  }
  bool derived = false;
  for (const SpeedupComparison& s : r.speedups) derived = derived || (!s.measured_published && s.not_evaluated.empty());
  out << "   (measured: the CSV's throughput_increase_pct" << (derived ? "; * from the measured times" : "") << ")\n";
}

std::string outcome_text(const GoalOutcome& g, const char* what, bool percent) {
  std::string s = g.judged == 0 ? "no " + std::string(what) + " compared"
                                : std::string(g.met() ? "met" : "NOT met") + ": " + std::to_string(g.within) + " of " +
                                      std::to_string(g.judged) + " " + what + " within, worst " +
                                      (percent ? format("%+.1f%%", 100 * g.worst) : format("%+.1f points", g.worst));
  if (g.not_judged > 0) s += " (" + std::to_string(g.not_judged) + " not compared)";
  return s;
}

// The dataset's goals as lines "<goal>: <outcome>"; "report only" without goals.
std::vector<std::string> goal_lines(const StepDatasetReport& r) {
  std::vector<std::string> lines;
  if (const auto g = row_goal(r))
    lines.push_back("every row within " + format("%g", 100 * *r.dataset.goals.row_error) + "%: " + outcome_text(*g, "rows", true));
  if (const auto g = speedup_goal(r))
    lines.push_back("speed-up within " + format("%g", *r.dataset.goals.speedup_points) +
                    " points: " + outcome_text(*g, "pairs", false));
  if (lines.empty()) {
    std::size_t compared = 0;
    for (const StepComparison& c : r.rows) compared += c.compared() ? 1 : 0;
    lines.push_back("no goal stated (report only): " + std::to_string(compared) + " of " + std::to_string(r.rows.size()) +
                    " rows compared");
  }
  return lines;
}

std::string csv_quoted(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

}  // namespace

void print_step_report(const StepDatasetReport& r, std::ostream& out) {
  const StepDataset& d = r.dataset;
  out << "== " << d.name << ": " << d.title << " (" << (d.dir / d.file).string() << ")\n";
  out << "   source:    " << d.source << "\n";
  if (d.not_simulated.empty())
    out << "   simulated: " << d.hardware << " scaled to each row's GPUs, " << to_string(r.network)
        << " network model, attention " << to_string(d.attention) << "\n";
  else
    out << "   not simulated: " << d.not_simulated << "\n";
  print_rows(r, out);
  print_speedups(r, out);
  for (const std::string& g : goal_lines(r)) out << "   goal: " << g << "\n";
  out << "\n";
}

void print_step_summary(const std::vector<StepDatasetReport>& reports, std::ostream& out) {
  out << "== summary\n";
  for (const StepDatasetReport& r : reports)
    for (const std::string& g : goal_lines(r)) {
      char name[64];
      std::snprintf(name, sizeof name, "%-28s", r.dataset.name.c_str());
      out << "   " << name << " " << g << "\n";
    }
}

void write_step_csv(const std::vector<StepDatasetReport>& reports, std::ostream& out) {
  out << "dataset,line,model,gpus,tp,pp,vpp,ep,cp,precision,global_batch,micro_batch,recompute,sequence_parallel,measure,measured,"
         "simulated,error,simulated_step_s,fits,status\n";
  for (const StepDatasetReport& r : reports)
    for (const StepComparison& c : r.rows) {
      const StepRow& w = c.row;
      out << r.dataset.name << "," << w.line << "," << w.model << "," << w.gpus << "," << w.tp << "," << w.pp << "," << w.vpp
          << "," << w.ep << "," << w.cp << "," << (!w.precision_stated ? "" : w.fp8 ? "fp8" : "bf16") << "," << w.global_batch << "," << (w.micro_batch > 0 ? std::to_string(w.micro_batch) : "") << "," << (w.recompute ? to_string(*w.recompute) : "") << ","
          << (w.sequence_parallel ? "yes" : "no") << "," << measure_column(r.dataset.measure) << ","
          << w.measured_text << ",";
      if (c.not_simulated.empty())
        out << format("%.6g", c.simulated) << "," << (c.compared() ? format("%.6f", c.error()) : "") << ","
            << format("%.6f", c.simulated_step_s) << "," << (c.fits ? "yes" : "no") << ",compared\n";
      else
        out << ",,,," << csv_quoted("not simulated: " + c.not_simulated) << "\n";
    }
}

}  // namespace moesim::validate
