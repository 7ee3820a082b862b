#include "sim/cost/gemm_calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <sstream>

#include "sim/core/error.h"

namespace moesim {
namespace {

// Where log(q) falls on a log-spaced axis: the lower corner and the weight of the upper one, with
// q held within the axis.
struct AxisPosition {
  std::size_t lower = 0;
  double weight = 0;  // of lower + 1; 0 on a one-point axis
};

AxisPosition locate(const std::vector<std::int64_t>& axis, double q) {
  MOESIM_CHECK(!axis.empty(), "empty calibration axis");
  const double x = std::clamp(q, static_cast<double>(axis.front()), static_cast<double>(axis.back()));
  if (axis.size() == 1) return {};
  // The last segment whose lower end is <= x.
  const auto upper = std::upper_bound(axis.begin(), axis.end(), x, [](double v, std::int64_t a) {
    return v < static_cast<double>(a);
  });
  std::size_t lower = static_cast<std::size_t>(upper - axis.begin()) - 1;
  lower = std::min(lower, axis.size() - 2);
  const double lo = std::log(static_cast<double>(axis[lower]));
  const double hi = std::log(static_cast<double>(axis[lower + 1]));
  return {lower, (std::log(x) - lo) / (hi - lo)};
}

bool within(const std::vector<std::int64_t>& axis, double q) {
  return q >= static_cast<double>(axis.front()) && q <= static_cast<double>(axis.back());
}

double log_rate(const GemmTimeTable& t, std::size_t i, std::size_t j, std::size_t l) {
  const double flops = 2.0 * static_cast<double>(t.m[i]) * static_cast<double>(t.n[j]) * static_cast<double>(t.k[l]);
  return std::log(flops / t.time_ns[t.index(i, j, l)]);
}

double log_rate(const BatchedGemmTable& t, const std::array<std::size_t, 4>& at) {
  const double flops = 2.0 * static_cast<double>(t.batch[at[0]]) * static_cast<double>(t.m[at[1]]) *
                       static_cast<double>(t.n[at[2]]) * static_cast<double>(t.k[at[3]]);
  return std::log(flops / t.time_ns[t.index(at[0], at[1], at[2], at[3])]);
}

std::string axis_range(const std::vector<std::int64_t>& axis) {
  return std::to_string(axis.front()) + ".." + std::to_string(axis.back());
}

}  // namespace

double calibrated_gemm_ns(const BatchedGemmTable& table, const GemmWork& work) {
  MOESIM_CHECK(table.time_ns.size() == table.batch.size() * table.m.size() * table.n.size() * table.k.size(),
               "batched calibration table size does not match its axes");
  if (work.batch <= 0 || work.m <= 0 || work.n <= 0 || work.k <= 0) return 0.0;
  const std::array<const std::vector<std::int64_t>*, 4> axes = {&table.batch, &table.m, &table.n, &table.k};
  const std::array<std::int64_t, 4> dims = {work.batch, work.m, work.n, work.k};
  // Below an axis's smallest point, as in the single-GEMM table: the GEMM costs as if it had it.
  std::array<double, 4> q{};
  std::array<AxisPosition, 4> pos{};
  double flops = 2.0;
  for (std::size_t a = 0; a < 4; ++a) {
    q[a] = std::max(static_cast<double>(dims[a]), static_cast<double>(axes[a]->front()));
    pos[a] = locate(*axes[a], q[a]);
    flops *= q[a];
  }
  // The 16 corners of the cell, each weighted by its share along every axis.
  double log_r = 0;
  for (unsigned corner = 0; corner < 16; ++corner) {
    double w = 1.0;
    std::array<std::size_t, 4> at{};
    for (std::size_t a = 0; a < 4; ++a) {
      const bool upper = (corner >> a) & 1u;
      w *= upper ? pos[a].weight : 1.0 - pos[a].weight;
      at[a] = pos[a].lower + (upper ? 1 : 0);
    }
    if (w != 0) log_r += w * log_rate(table, at);
  }
  return flops / std::exp(log_r);
}

bool in_measured_range(const BatchedGemmTable& table, const GemmWork& work) {
  return within(table.batch, static_cast<double>(work.batch)) && within(table.m, static_cast<double>(work.m)) &&
         within(table.n, static_cast<double>(work.n)) && within(table.k, static_cast<double>(work.k));
}

const BatchedGemmTable* batched_table_for(const GpuSpec& gpu, const GemmWork& work) {
  if (!gpu.calibration || work.batch <= 1) return nullptr;
  const BatchedGemmTables& tables = gpu.calibration->batched_gemm;
  // The GEMM's own layout's table; a calibration measured before layouts has nn tables alone,
  // which then price every layout as they did before.
  for (GemmLayout layout : {work.layout, GemmLayout::kNN}) {
    const auto per_layout = tables.find(layout);
    if (per_layout == tables.end()) continue;
    const auto it = per_layout->second.find(work.dtype);
    if (it != per_layout->second.end()) return &it->second;
  }
  return nullptr;
}

double calibrated_gemm_ns(const GemmTimeTable& table, const GemmWork& work) {
  MOESIM_CHECK(table.time_ns.size() == table.m.size() * table.n.size() * table.k.size(),
               "calibration table size does not match its axes");
  if (work.batch <= 0 || work.m <= 0 || work.n <= 0 || work.k <= 0) return 0.0;
  // Below an axis's smallest point a GEMM costs as if it had that dimension: the smallest shapes
  // are bound by the launch gap, which does not shrink with the GEMM.
  const double rows = std::max(static_cast<double>(work.batch) * static_cast<double>(work.m),
                               static_cast<double>(table.m.front()));
  const double n = std::max(static_cast<double>(work.n), static_cast<double>(table.n.front()));
  const double k = std::max(static_cast<double>(work.k), static_cast<double>(table.k.front()));
  const double flops = 2.0 * rows * n * k;
  const AxisPosition pm = locate(table.m, rows);
  const AxisPosition pn = locate(table.n, n);
  const AxisPosition pk = locate(table.k, k);
  double log_r = 0;
  for (int di = 0; di < 2; ++di) {
    const double wi = di ? pm.weight : 1.0 - pm.weight;
    if (wi == 0) continue;
    for (int dj = 0; dj < 2; ++dj) {
      const double wj = dj ? pn.weight : 1.0 - pn.weight;
      if (wj == 0) continue;
      for (int dl = 0; dl < 2; ++dl) {
        const double wl = dl ? pk.weight : 1.0 - pk.weight;
        if (wl == 0) continue;
        log_r += wi * wj * wl * log_rate(table, pm.lower + di, pn.lower + dj, pk.lower + dl);
      }
    }
  }
  return flops / std::exp(log_r);
}

bool in_measured_range(const GemmTimeTable& table, const GemmWork& work) {
  return within(table.m, static_cast<double>(work.batch) * static_cast<double>(work.m)) &&
         within(table.n, static_cast<double>(work.n)) && within(table.k, static_cast<double>(work.k));
}

namespace {

// The calibration file's section that holds `table`.
std::string table_section(const GpuSpec& gpu, const BatchedGemmTable* table) {
  for (const auto& [layout, tables] : gpu.calibration->batched_gemm)
    for (const auto& [dtype, t] : tables)
      if (&t == table) return batched_gemm_section(layout) + "." + std::string(to_string(dtype));
  return "?";
}

}  // namespace

std::vector<std::string> calibration_range_warnings(const TaskGraph& graph, const GpuSpec& gpu) {
  if (!gpu.calibration) return {};
  struct Outside {
    const void* table = nullptr;  // the table that priced them
    std::string label;            // "bf16", "bf16 batched (batched_gemm_tn)"
    std::string range;
    int count = 0;
    std::string first;
  };
  std::vector<Outside> outside;  // per table, in the order first met
  for (std::size_t i = 0; i < graph.num_tasks(); ++i) {
    const Task& task = graph.task(static_cast<TaskIndex>(i));
    const auto* work = std::get_if<GemmWork>(&task.work);
    if (!work) continue;
    std::ostringstream shape;
    Outside seen;
    seen.label = std::string(to_string(work->dtype));
    if (const BatchedGemmTable* t = batched_table_for(gpu, *work)) {
      if (in_measured_range(*t, *work)) continue;
      shape << "batch = " << work->batch << ", m = " << work->m;
      seen.table = t;
      seen.label += " batched " + std::string(to_string(work->layout));
      seen.range = table_section(gpu, t) + ": batch " + axis_range(t->batch) + ", m " + axis_range(t->m) + ", n " +
                   axis_range(t->n) + ", k " + axis_range(t->k);
    } else {
      const auto table = gpu.calibration->gemm.find(work->dtype);
      if (table == gpu.calibration->gemm.end() || in_measured_range(table->second, *work)) continue;
      shape << "batch*m = " << work->batch * work->m;
      seen.table = &table->second;
      const GemmTimeTable& single = table->second;
      seen.range = "gemm." + seen.label + ": m " + axis_range(single.m) + ", n " + axis_range(single.n) + ", k " +
                   axis_range(single.k);
    }
    auto o = std::find_if(outside.begin(), outside.end(), [&](const Outside& x) { return x.table == seen.table; });
    if (o == outside.end()) {
      seen.first = task.id + " (" + shape.str() + ", n = " + std::to_string(work->n) + ", k = " +
                   std::to_string(work->k) + ")";
      outside.push_back(std::move(seen));
      o = std::prev(outside.end());
    }
    ++o->count;
  }
  std::vector<std::string> out;
  for (const Outside& o : outside) {
    out.push_back(std::to_string(o.count) + " " + o.label + " GEMM task(s) fall outside the measured range of " +
                  gpu.calibration->file + " (" + o.range + "), e.g. " + o.first +
                  "; below the range they cost as the smallest measured shape, above it they keep the edge's efficiency "
                  "(no extrapolated trend)");
  }
  return out;
}

}  // namespace moesim
