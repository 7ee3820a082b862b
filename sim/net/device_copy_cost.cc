#include "sim/net/device_copy_cost.h"

#include <cmath>
#include <iterator>
#include <map>
#include <utility>
#include <variant>

#include "sim/core/error.h"
#include "sim/core/units.h"

namespace moesim {

std::optional<KernelFigure> device_copy_figure(const GpuSpec& gpu, int p) {
  if (!gpu.calibration || gpu.calibration->device_copies.by_ranks.empty()) return std::nullopt;
  const std::map<int, KernelFigure>& fits = gpu.calibration->device_copies.by_ranks;
  const auto above = fits.lower_bound(p);  // the first measured count >= p
  if (above == fits.end()) return fits.rbegin()->second;
  if (above->first == p || above == fits.begin()) return above->second;
  const auto below = std::prev(above);
  const double w = static_cast<double>(p - below->first) / static_cast<double>(above->first - below->first);
  const KernelFigure& a = below->second;
  const KernelFigure& b = above->second;
  MOESIM_CHECK(a.bandwidth > 0 && b.bandwidth > 0, "device-copy figures with a positive bandwidth (loader rule)");
  KernelFigure f;
  f.launch_ns = static_cast<TimeNs>(std::llround((1 - w) * static_cast<double>(a.launch_ns) + w * static_cast<double>(b.launch_ns)));
  f.bandwidth = 1.0 / ((1 - w) / a.bandwidth + w / b.bandwidth);
  return f;
}

std::vector<std::string> device_copy_range_warnings(const TaskGraph& graph, const ClusterSpec& cluster) {
  const GpuSpec& gpu = cluster.node.gpu;
  if (!gpu.calibration || gpu.calibration->device_copies.by_ranks.empty()) return {};
  const std::map<int, KernelFigure>& fits = gpu.calibration->device_copies.by_ranks;
  const int lo = fits.begin()->first, hi = fits.rbegin()->first;
  std::map<int, std::pair<int, std::string>> outside;  // p -> {count, first task id}
  for (std::size_t i = 0; i < graph.num_tasks(); ++i) {
    const Task& task = graph.task(static_cast<TaskIndex>(i));
    const auto* work = std::get_if<CollectiveWork>(&task.work);
    if (!work) continue;
    const auto p = static_cast<int>(graph.group(work->group).size());
    // The collectives priced as device copies (alpha_beta.cc): a ring of one rank costs nothing.
    const bool device_copy = p == 1 ? work->op == CollectiveOp::kAllToAll : cluster.node.loopback;
    if (!device_copy || (p >= lo && p <= hi)) continue;
    auto& [count, first] = outside[p];
    if (count++ == 0) first = task.id;
  }
  std::vector<std::string> out;
  for (const auto& [p, o] : outside) {
    out.push_back(std::to_string(o.first) + " device-copy collective(s) of " + std::to_string(p) +
                  " ranks fall outside the rank counts measured in " + gpu.calibration->file + " (" +
                  std::to_string(lo) + " to " + std::to_string(hi) + "), e.g. " + o.second + "; they take the " +
                  std::to_string(p < lo ? lo : hi) + "-rank launch and bandwidth (no extrapolated trend)");
  }
  return out;
}

double calibrated_copy_ns(const KernelFigure& figure, double rounds, double bytes) {
  return rounds * static_cast<double>(figure.launch_ns) + 2.0 * bytes / (figure.bandwidth / kNsPerS);
}

}  // namespace moesim
