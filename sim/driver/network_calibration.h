// Calibrating a node's intra-node network from a measured all-to-all (`moesim calibrate
// --alltoall-log`, docs/calibration.md): a pairwise all-to-all of `ranks` GPUs of one node with b
// bytes per peer takes t(b) = latency + (ranks - 1) b / bandwidth, in the alpha-beta model exactly
// and in the flow model on a switched node. The measurement is fitted to that line; each model's
// parameters are then moved so that the model's own line for the same collective is the measured
// one:
//   alpha-beta: the node's intra_node link (bandwidth x efficiency scaled by measured / modelled
//               slope, efficiency 1; latency shifted by measured - modelled intercept);
//   flow:       every topology link type on a route between the measured GPUs (NVLink; on a node
//               where some pairs have none, also the PCIe and CPU links they cross), lane
//               bandwidth scaled by k and latency shifted by d. When every route has the same
//               latency this moves the model's line by exactly (k, d); when latencies differ,
//               flows sharing a link start apart and it does not, so (k, d) are refined by a few
//               secant steps against the model's own line (a straight line may still not fit it
//               exactly: the residual below says how well). A type that also joins the GPUs to
//               their NICs changes inter-node routes too; the notes say so.
// Both are checked afterwards: the largest relative difference between each calibrated model and
// the measured times is reported (it is not zero when the measurement itself is no line).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/spec/hardware_spec.h"

namespace moesim {

struct AllToAllPoint {
  std::int64_t bytes_per_peer = 0;
  double time_ns = 0;
};

struct AllToAllLine {
  double latency_ns = 0;
  double bandwidth = 0;        // bytes/s each GPU sends to its peers
  bool latency_clamped = false;  // the free fit gave a negative latency; refitted through 0
};

// Least squares in relative error (each point weighted by 1 / t^2, so that small messages count as
// much as large ones). Throws InputError for fewer than two distinct sizes, ranks < 2, or times
// that do not grow with the size.
AllToAllLine fit_all_to_all(const std::vector<AllToAllPoint>& points, int ranks);

struct IntraNodeCalibration {
  AllToAllLine measured;
  LinkSpec intra_node;                         // for the alpha-beta model
  std::map<std::string, LinkSpec> link_types;  // for the flow model (empty without a topology)
  double alpha_beta_max_error = 0;             // |model - measured| / measured, worst point, after
  double flow_max_error = 0;                   // the same for the flow model (0 without a topology)
  std::vector<std::string> notes;              // clamped latencies and the like, for the user
};

// Throws InputError unless an all-to-all of GPUs 0..ranks-1 can calibrate `cluster`'s node: a
// node of several GPUs (not a loopback node) and 2 <= ranks <= gpus_per_node. Checked by
// calibrate_intra_node, and by callers before they spend time measuring.
void check_intra_node_ranks(const ClusterSpec& cluster, int ranks);

// The calibration of `cluster`'s node for an all-to-all of GPUs 0..ranks-1 measured as `points`
// (check_intra_node_ranks first).
IntraNodeCalibration calibrate_intra_node(const ClusterSpec& cluster, int ranks,
                                          const std::vector<AllToAllPoint>& points);

// The calibration file's network sections (intra_node, link_types, all_to_all: the loader's keys,
// sim/spec/loader.h), `source` saying where the measurement came from.
std::string network_calibration_yaml(const IntraNodeCalibration& cal, int ranks,
                                     const std::vector<AllToAllPoint>& points, const std::string& source);

}  // namespace moesim
