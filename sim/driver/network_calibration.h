// Calibrating a cluster's network from a measured all-to-all (`moesim calibrate --alltoall-log`,
// docs/calibration.md). A pairwise all-to-all with b bytes per peer among `gpus` takes
// t(b) = latency + (ranks - 1) b / bandwidth, exactly in the alpha-beta model on one node and
// nearly so elsewhere. The measurement is fitted to that line; each network model's parameters
// are then moved, by a bandwidth factor k and a latency shift d, until the model's own line for
// the same collective is the measured one. What moves depends on where the GPUs are:
//   one node (intra-node):
//     alpha-beta: the node's intra_node link (bandwidth x efficiency x k, efficiency 1; latency + d);
//     flow:       every topology link type on a route between the measured GPUs (NVLink; on a
//                 node where some pairs have none, also the PCIe and CPU links they cross),
//                 lane bandwidth x k and latency + d. A type that also joins the GPUs to their
//                 NICs changes inter-node routes too; the notes say so.
//   several nodes (inter-node; the intra-node links keep their values, so calibrate them first):
//     alpha-beta: the cluster's inter_node link (per GPU; efficiency 1 after);
//     flow:       the NIC ports (line rate x k, latency + d); the leaves' uplinks follow them.
// One (k, d) moves a model's line by exactly (k, d) only when a single kind of link sets every
// time; where route latencies differ, or the other link class sets some points, it does not, so
// (k, d) are refined by repeated corrections against the model's own line. Both models are
// checked afterwards: the largest relative difference between each calibrated model and the
// measured times is reported (not zero when the measurement itself is no line, or when the
// links that can move cannot make the model's line the measured one; a note then says so).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/driver/least_squares.h"
#include "sim/driver/logged_gpus.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

struct NetworkCalibration {
  bool inter_node = false;  // the GPUs span several nodes (see the header comment for what moves)
  int nodes = 1;            // the nodes they are on
  AllToAllLine measured;
  // Intra-node calibration:
  std::optional<LinkSpec> intra_node;          // for the alpha-beta model
  std::map<std::string, LinkSpec> link_types;  // for the flow model (empty without a topology)
  // Inter-node calibration:
  std::optional<LinkSpec> inter_node_link;     // for the alpha-beta model (ClusterSpec::inter_node)
  std::optional<LinkSpec> nic_port;            // for the flow model (without a fabric: none)
  double alpha_beta_max_error = 0;             // |model - measured| / measured, worst point, after
  double flow_max_error = 0;                   // the same for the flow model (0 when not calibrated)
  std::vector<std::string> notes;              // clamped latencies and the like, for the user
};

// Throws InputError unless `cluster` has a network to calibrate: more than one GPU, not a loopback
// node.
void check_has_network(const ClusterSpec& cluster);

// Throws InputError unless an all-to-all among `gpus` can calibrate `cluster`: check_has_network,
// and at least 2 distinct GPUs of the cluster. Checked by calibrate_network, and by callers before
// they spend time measuring.
void check_network_gpus(const ClusterSpec& cluster, const std::vector<int>& gpus);

// The calibration of `cluster`'s network for an all-to-all among `gpus` measured as `points`.
NetworkCalibration calibrate_network(const ClusterSpec& cluster, const std::vector<int>& gpus,
                                     const std::vector<AllToAllPoint>& points);

// The calibration file's network sections (the loader's keys, sim/spec/loader.h): intra_node,
// link_types and all_to_all for one node; inter_node, nic_port and inter_node_all_to_all for
// several. `source` says where the measurement came from.
std::string network_calibration_yaml(const NetworkCalibration& cal, int ranks,
                                     const std::vector<AllToAllPoint>& points, const std::string& source);

}  // namespace moesim
