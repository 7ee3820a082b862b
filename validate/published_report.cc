// The text and CSV of `moesim validate published` (validate/published_replay.h).
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "validate/published_replay.h"

namespace moesim::validate {

namespace {

constexpr double kBusbwMedianGoal = 0.10, kBusbwWorstGoal = 0.25, kSmallTimeMedianGoal = 0.25, kGemmMedianGoal = 0.10;

struct Verdicts {
  ErrorStats busbw_large, time_small, gemm;
  bool busbw_met() const {
    return busbw_large.count > 0 && busbw_large.median_abs <= kBusbwMedianGoal && std::abs(busbw_large.worst) <= kBusbwWorstGoal;
  }
  bool time_met() const { return time_small.count > 0 && time_small.median_abs <= kSmallTimeMedianGoal; }
  bool gemm_met() const { return gemm.count > 0 && gemm.median_abs <= kGemmMedianGoal; }
};

Verdicts verdicts(const DatasetReport& r) {
  std::vector<double> large, small, gemm;
  for (const CollectiveComparison& c : r.collectives)
    (c.size_bytes >= kLargeMessageBytes ? large : small).push_back(c.size_bytes >= kLargeMessageBytes ? c.busbw_error() : c.time_error());
  for (const GemmComparison& g : r.gemms) gemm.push_back(g.error());
  return Verdicts{error_stats(large), error_stats(small), error_stats(gemm)};
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * x);
  return buf;
}

std::string stats_text(const ErrorStats& st) {
  if (st.count == 0) return "no points";
  char buf[128];
  std::snprintf(buf, sizeof buf, "median |error| %.1f%%, worst %s over %zu point(s)", 100 * st.median_abs,
                percent(st.worst).c_str(), st.count);
  return buf;
}

const char* met(bool ok, const ErrorStats& st) { return st.count == 0 ? "no points" : ok ? "met" : "NOT met"; }

void print_header(const DatasetReport& r, std::ostream& out) {
  const DatasetSource& s = r.source;
  out << "== " << s.name << ": " << s.title << " (" << to_string(s.kind) << ", " << s.dir.string() << "/" << s.file << ")\n";
  out << "   source:    " << s.url << " (" << s.date << ")\n";
  out << "   measured:  " << s.gpu << ", " << s.nodes << " node(s), NCCL " << s.nccl << ", CUDA " << s.cuda << "\n";
  out << "   simulated: " << r.hardware_name << " (" << s.hardware << "), " << r.model << "\n";
  for (const std::string& note : r.notes) out << "   note: " << note << "\n";
}

void print_collectives(const DatasetReport& r, const Verdicts& v, std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof line, "   %-14s %5s %5s %12s %11s %11s %8s %9s %9s %8s\n", "collective", "ranks", "nodes", "size(B)",
                "meas(us)", "sim(us)", "time", "meas GB/s", "sim GB/s", "busbw");
  out << line;
  for (const CollectiveComparison& c : r.collectives) {
    std::snprintf(line, sizeof line, "   %-14s %5d %5d %12lld %11.2f %11.2f %8s %9.2f %9.2f %8s\n", std::string(to_string(c.op)).c_str(),
                  c.ranks, c.nodes, static_cast<long long>(c.size_bytes), c.measured_us, c.simulated_us,
                  percent(c.time_error()).c_str(), c.measured_busbw, c.simulated_busbw, percent(c.busbw_error()).c_str());
    out << line;
  }
  out << "   busbw, sizes >= 1 MiB: " << stats_text(v.busbw_large) << "; goal median <= 10%, worst <= 25%: "
      << met(v.busbw_met(), v.busbw_large) << "\n";
  out << "   time,  sizes <  1 MiB: " << stats_text(v.time_small) << "; goal median <= 25%: " << met(v.time_met(), v.time_small) << "\n";
}

void print_gemms(const DatasetReport& r, const Verdicts& v, std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof line, "   %5s %6s %6s %6s %-18s %5s %11s %11s %8s\n", "b", "m", "n", "k", "table dtype", "as", "meas TF/s",
                "sim TF/s", "error");
  out << line;
  std::map<std::string, std::vector<double>> by_dtype;
  for (const GemmComparison& g : r.gemms) {
    const MeasuredGemm& p = g.measured;
    std::snprintf(line, sizeof line, "   %5lld %6lld %6lld %6lld %-18s %5s %11.1f %11.1f %8s\n", static_cast<long long>(p.b),
                  static_cast<long long>(p.m), static_cast<long long>(p.n), static_cast<long long>(p.k), p.dtype_key.c_str(),
                  std::string(to_string(p.dtype)).c_str(), p.flop_per_s / 1e12, g.simulated_flop_per_s / 1e12,
                  percent(g.error()).c_str());
    out << line;
    by_dtype[p.dtype_key].push_back(g.error());
  }
  for (const auto& [key, errors] : by_dtype) out << "   " << key << ": " << stats_text(error_stats(errors)) << "\n";
  out << "   TFLOP/s, every point: " << stats_text(v.gemm) << "; goal median <= 10%: " << met(v.gemm_met(), v.gemm) << "\n";
}

}  // namespace

void print_dataset_report(const DatasetReport& r, std::ostream& out) {
  print_header(r, out);
  const Verdicts v = verdicts(r);
  if (is_gemm_table(r.source.kind)) {
    print_gemms(r, v, out);
  } else {
    print_collectives(r, v, out);
  }
  out << "\n";
}

void print_goal_summary(const std::vector<DatasetReport>& reports, std::ostream& out) {
  out << "== summary: median |error| (worst) per dataset and goal\n";
  char line[256];
  for (const DatasetReport& r : reports) {
    const Verdicts v = verdicts(r);
    auto row = [&](const char* goal, const ErrorStats& st, bool ok) {
      std::snprintf(line, sizeof line, "   %-32s %-34s %6.1f%% (%s) over %4zu: %s\n", r.source.name.c_str(), goal,
                    100 * st.median_abs, percent(st.worst).c_str(), st.count, met(ok, st));
      out << line;
    };
    if (is_gemm_table(r.source.kind)) {
      row("TFLOP/s (median <= 10%)", v.gemm, v.gemm_met());
    } else {
      row("busbw >= 1 MiB (<= 10%, <= 25%)", v.busbw_large, v.busbw_met());
      row("time < 1 MiB (median <= 25%)", v.time_small, v.time_met());
    }
  }
}

void write_csv(const std::vector<DatasetReport>& reports, std::ostream& out) {
  out << "dataset,kind,what,ranks_or_batch,size_or_shape,measured,simulated,unit,error\n";
  char line[320];
  for (const DatasetReport& r : reports) {
    for (const CollectiveComparison& c : r.collectives) {
      std::snprintf(line, sizeof line, "%s,%s,%s,%d,%lld,%.6g,%.6g,us,%.6f\n", r.source.name.c_str(),
                    std::string(to_string(r.source.kind)).c_str(), std::string(to_string(c.op)).c_str(), c.ranks,
                    static_cast<long long>(c.size_bytes), c.measured_us, c.simulated_us, c.time_error());
      out << line;
    }
    for (const GemmComparison& g : r.gemms) {
      const MeasuredGemm& p = g.measured;
      std::snprintf(line, sizeof line, "%s,%s,%s,%lld,%lldx%lldx%lld,%.6g,%.6g,TFLOP/s,%.6f\n", r.source.name.c_str(),
                    std::string(to_string(r.source.kind)).c_str(), std::string(to_string(p.dtype)).c_str(),
                    static_cast<long long>(p.b), static_cast<long long>(p.m), static_cast<long long>(p.n),
                    static_cast<long long>(p.k), p.flop_per_s / 1e12, g.simulated_flop_per_s / 1e12, g.error());
      out << line;
    }
  }
}

}  // namespace moesim::validate
