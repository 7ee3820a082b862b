// The cost of a device-copy collective (one rank's all-to-all; a loopback node's collectives,
// docs/concepts.md "Loopback") from a calibration's measured figures (`moesim calibrate`,
// section device_copy_collectives): the runtime's loopback all-to-all of p virtual ranks, fitted
// per measured p to launch + bytes / bandwidth, bytes being 2 x the sum of every block.
//
// A p between two measured counts p0 < p < p1 takes the launch and the time per byte
// (1 / bandwidth) interpolated linearly in p between theirs; a p below the smallest or above the
// largest measured count takes the edge's figures, held, not extrapolated (a larger group's fixed
// cost, p^2 copies issued by one host thread, is then underestimated: measure its p). That is not
// silent: device_copy_range_warnings() names such collectives for the summary and the JSON report.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/graph/task_graph.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

// The figures for a group of p virtual ranks; nullopt where the GPU has no measured ones.
std::optional<KernelFigure> device_copy_figure(const GpuSpec& gpu, int p);

// One line per group size whose device-copy collectives in `graph` (all-to-alls of one rank; on a
// loopback node, every collective of two or more) fall outside the rank counts `cluster`'s GPU
// calibration measured: how many, the first one's id, the measured range. Empty without figures.
std::vector<std::string> device_copy_range_warnings(const TaskGraph& graph, const ClusterSpec& cluster);

// `rounds` times the figure's launch plus `bytes` (every block once) read and written at its
// bandwidth, in ns.
double calibrated_copy_ns(const KernelFigure& figure, double rounds, double bytes);

}  // namespace moesim
