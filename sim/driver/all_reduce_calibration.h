// Calibrating NCCL's ring and tree terms from a measured all-reduce (`moesim calibrate
// --allreduce-log`, docs/calibration.md). An all-reduce of S bytes runs, in both network models,
// as the (algorithm, protocol) pair NCCL would choose, at
//   t(S) = base(a, q) + hops x hop(a, q) + traffic(S) / (link bandwidth x efficiency(a, q))
// (sim/net/nccl_model.h). A log of one group of GPUs determines two things: how long a hop takes
// and what share of the links' bandwidth the all-reduce reaches. So two factors are fitted, by
// least squares in relative error over every logged size (sim/driver/least_squares.h), on the
// network model the hardware's `auto` picks (flow with a topology, alpha-beta without):
//   hop factor h:        NCCL's per-hop latencies of the hop the log crosses, ring and tree, every
//                        protocol, x h: one node, the node's intra-node row (nvlink or pcie as its
//                        nccl.intra says); several nodes, the network row (the cluster's
//                        inter_node.latency stays: the all-to-all fit owns it);
//   efficiency factor e: NCCL's bandwidth efficiencies, ring and tree, every protocol, x e, at most
//                        1 / the largest (no protocol beyond the links' line rate).
// Kept: NCCL's base latencies (one rank count cannot tell them from the hops), the other hop rows,
// channels, and every link (the hardware's, or an all-to-all calibration's): the all-reduce moves
// only its own terms, so a calibration file may hold both fits. All-gather and reduce-scatter run
// on the same rings and see the fitted terms too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/driver/least_squares.h"
#include "sim/driver/simulation.h"
#include "sim/net/nccl_model.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

// One row of an all_reduce_perf log: nccl-tests' size (the per-rank buffer) and the time.
struct AllReducePoint {
  std::int64_t bytes = 0;
  double time_ns = 0;
};

struct AllReduceCalibration {
  int nodes = 1;                     // the nodes the GPUs are on
  NetworkModel model = NetworkModel::kAlphaBeta;  // the model fitted
  NcclHop hop = NcclHop::kNvlink;    // the hop row the hop factor scales
  FittedParameter hop_factor;
  FittedParameter efficiency_factor;
  RelativeFit fit;                   // residuals and the fitted model's times, per point
  std::vector<NcclRun> runs;         // the algorithm and protocol the fitted model runs, per point
  NcclTuning tuning;                 // the fitted constants
  double other_model_max_error = -1;  // the other model with the same constants, worst |error|; -1: not run
  std::vector<std::string> notes;
};

// Throws InputError for fewer than 3 sizes, a group of GPUs the cluster does not have (as
// check_network_gpus) or a cluster without a network.
AllReduceCalibration calibrate_all_reduce(const ClusterSpec& cluster, const std::vector<int>& gpus,
                                          const std::vector<AllReducePoint>& points);

// The calibration file's sections: `nccl` (the fitted hop row and the efficiencies) and
// `all_reduce` (the measured points, for the record), after comment lines with the fit.
std::string all_reduce_calibration_yaml(const AllReduceCalibration& cal, int ranks,
                                        const std::vector<AllReducePoint>& points, const std::string& source);

}  // namespace moesim
