#include "validate/calibration_replay.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ostream>

#include "sim/core/error.h"
#include "sim/cost/compute_cost.h"
#include "validate/published.h"

namespace moesim::validate {

namespace {

// printf-style formatting into a string (the reports' columns).
std::string format(const char* spec, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* spec, ...) {
  char buf[256];
  va_list args;
  va_start(args, spec);
  std::vsnprintf(buf, sizeof buf, spec, args);
  va_end(args);
  return buf;
}

int element_bytes_of(DType math) { return (math == DType::kBf16 || math == DType::kFp16) ? 2 : 4; }

double model_us(const ComputeCostModel& cost, const GemmWork& work) {
  return static_cast<double>(cost.gemm_duration(work)) / 1e3;
}

void add_single(CalibrationReplay& r, const ComputeCostModel& cost, DType dtype, const GemmTimeTable& t) {
  for (std::size_t i = 0; i < t.m.size(); ++i)
    for (std::size_t j = 0; j < t.n.size(); ++j)
      for (std::size_t l = 0; l < t.k.size(); ++l) {
        const GemmWork w{1, t.m[i], t.n[j], t.k[l], dtype, element_bytes_of(dtype)};
        r.points.push_back({"gemm", dtype, 1, w.m, w.n, w.k, t.time_ns[t.index(i, j, l)] / 1e3, model_us(cost, w)});
      }
}

void add_batched(CalibrationReplay& r, const ComputeCostModel& cost, GemmLayout layout, DType dtype,
                 const BatchedGemmTable& t) {
  for (std::size_t b = 0; b < t.batch.size(); ++b)
    for (std::size_t i = 0; i < t.m.size(); ++i)
      for (std::size_t j = 0; j < t.n.size(); ++j)
        for (std::size_t l = 0; l < t.k.size(); ++l) {
          GemmWork w{t.batch[b], t.m[i], t.n[j], t.k[l], dtype, element_bytes_of(dtype)};
          w.layout = layout;
          r.points.push_back({batched_gemm_section(layout), dtype, w.batch, w.m, w.n, w.k,
                              t.time_ns[t.index(b, i, j, l)] / 1e3, model_us(cost, w)});
        }
}

std::string shape_of(const CalibrationGemmPoint& p) {
  const auto ll = [](std::int64_t v) { return static_cast<long long>(v); };
  return (p.batch > 1 ? format("%lld x ", ll(p.batch)) : std::string()) + format("%lldx%lldx%lld", ll(p.m), ll(p.n), ll(p.k));
}

// The median |error| of the points measured in [from_us, to_us), or "-" without any.
std::string median_in(const std::vector<const CalibrationGemmPoint*>& points, double from_us, double to_us) {
  std::vector<double> abs;
  for (const CalibrationGemmPoint* p : points)
    if (p->measured_us >= from_us && p->measured_us < to_us) abs.push_back(std::abs(p->error()));
  if (abs.empty()) return "-";
  return format("%.1f%% (%zu)", 100 * median(abs), abs.size());
}

}  // namespace

CalibrationReplay replay_calibration_gemms(const CalibrationSpec& calibration, const ClusterSpec& datasheet) {
  ClusterSpec checked = datasheet;
  apply_calibration(checked, calibration);  // its rules: the same GPU, a peak for every dtype, not calibrated twice
  if (calibration.gemm.empty() && calibration.batched_gemm.empty())
    throw InputError(calibration.origin, "calibration " + calibration.file + " holds no GEMM table to replay");
  CalibrationReplay r;
  r.file = calibration.file;
  r.device = calibration.device;
  r.node = datasheet.node.name;
  const ComputeCostModel cost(datasheet);
  for (const auto& [dtype, table] : calibration.gemm) add_single(r, cost, dtype, table);
  for (const auto& [layout, tables] : calibration.batched_gemm)
    for (const auto& [dtype, table] : tables) add_batched(r, cost, layout, dtype, table);
  return r;
}

void print_calibration_replay(const CalibrationReplay& r, std::ostream& out) {
  out << "# moesim validate calibration: the GEMM times of " << r.file << " (measured on "
      << (r.device.empty() ? "an unnamed device" : r.device) << ")\n"
      << "# against the datasheet shape model of node " << r.node
      << "; error = (model - measured) / measured, negative: the model is faster than the GPU\n";
  out << format("%-16s %-5s %6s %9s %9s %9s  %-22s %14s %14s %14s\n", "table", "dtype", "points", "median|e|", "bias",
                "worst", "worst shape", "< 20 us", "20-200 us", ">= 200 us");
  std::vector<double> all_abs;
  for (std::size_t first = 0; first < r.points.size();) {
    std::size_t last = first;
    std::vector<const CalibrationGemmPoint*> group;
    while (last < r.points.size() && r.points[last].table == r.points[first].table &&
           r.points[last].dtype == r.points[first].dtype)
      group.push_back(&r.points[last++]);
    std::vector<double> errors, abs;
    const CalibrationGemmPoint* worst = group.front();
    for (const CalibrationGemmPoint* p : group) {
      errors.push_back(p->error());
      abs.push_back(std::abs(p->error()));
      if (std::abs(p->error()) > std::abs(worst->error())) worst = p;
    }
    all_abs.insert(all_abs.end(), abs.begin(), abs.end());
    out << format("%-16s %-5s %6zu %8.1f%% %+8.1f%% %+8.1f%%  %-22s %14s %14s %14s\n", group.front()->table.c_str(),
                  std::string(to_string(group.front()->dtype)).c_str(), group.size(), 100 * median(abs),
                  100 * median(errors), 100 * worst->error(), shape_of(*worst).c_str(),
                  median_in(group, 0, 20).c_str(), median_in(group, 20, 200).c_str(),
                  median_in(group, 200, INFINITY).c_str());
    first = last;
  }
  out << format("all %zu points: median |error| %.1f%%\n", all_abs.size(), 100 * median(all_abs));
}

void write_calibration_replay_csv(const CalibrationReplay& r, std::ostream& out) {
  out << "table,dtype,batch,m,n,k,measured_us,model_us,error\n";
  for (const CalibrationGemmPoint& p : r.points)
    out << p.table << ',' << to_string(p.dtype) << ',' << p.batch << ',' << p.m << ',' << p.n << ',' << p.k << ','
        << format("%.4f,%.4f,%.6f", p.measured_us, p.model_us, p.error()) << '\n';
}

}  // namespace moesim::validate
