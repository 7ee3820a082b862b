#include "sim/net/device_copy_cost.h"

#include <cmath>
#include <iterator>

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

bool device_copy_in_measured_range(const GpuSpec& gpu, int p) {
  if (!gpu.calibration || gpu.calibration->device_copies.by_ranks.empty()) return true;
  const std::map<int, KernelFigure>& fits = gpu.calibration->device_copies.by_ranks;
  return p >= fits.begin()->first && p <= fits.rbegin()->first;
}

double calibrated_copy_ns(const KernelFigure& figure, double rounds, double bytes) {
  return rounds * static_cast<double>(figure.launch_ns) + 2.0 * bytes / (figure.bandwidth / kNsPerS);
}

}  // namespace moesim
