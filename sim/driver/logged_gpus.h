// Where the ranks of an nccl-tests log ran, as GPUs of a cluster preset: shared by the network
// calibrations (`moesim calibrate --alltoall-log`, `--allreduce-log`) and `moesim collective --against`.
#pragma once

#include <string>
#include <vector>

#include "sim/spec/hardware_spec.h"
#include "sim/spec/nccl_tests_log.h"

namespace moesim {

// The distinct cluster GPUs (global ids, node-major) the ranks of an nccl-tests log ran on, in rank order:
// the log's hosts, in the order of their lowest rank, are nodes 0, 1, ...; a rank's device is its
// GPU within the node. Where a host's ranks name no device, or repeat one (one process per GPU, each
// seeing only its own as device 0), that host's ranks take GPUs 0, 1, ... in rank order and a note
// says so. Throws InputError naming the log for ranks that are not 0..n-1, more hosts than the
// cluster has nodes, or a device beyond the node's GPUs. A log without "#  Rank" lines is one
// node's GPUs 0..ranks_if_unlisted-1 (0, or more than a node has: an input error).
struct LoggedGpus {
  std::vector<int> gpus;
  std::vector<std::string> notes;
};
LoggedGpus gpus_of_log(const NcclTestsLog& log, const ClusterSpec& cluster, int ranks_if_unlisted);

// How many ranks on how many hosts an nccl-tests log ran: from its "#  Rank" lines (`line`, the
// last of them), or without them `ranks_if_unlisted` on one host (`line` 0).
struct LoggedShape {
  int ranks = 0;
  int hosts = 0;
  int line = 0;
};
LoggedShape shape_of_log(const NcclTestsLog& log, int ranks_if_unlisted);

// Where an all-to-all log of `shape` cannot be a measurement of what `cluster` describes, why
// (empty where it can): a log on one host calibrates the node's links, so it ran on each of the
// node's GPUs; a log on several hosts calibrates the cluster's inter-node network, so it ran on
// every GPU of every node (fewer GPUs to a NIC, or fewer nodes on the fabric, reach more per GPU).
std::string alltoall_shape_mismatch(const LoggedShape& shape, const ClusterSpec& cluster);

// GPUs 0..n-1: the first n of node 0.
std::vector<int> first_gpus(int n);

// How many of `cluster`'s nodes hold `gpus`: more than one makes a calibration inter-node.
int nodes_holding(const ClusterSpec& cluster, const std::vector<int>& gpus);

}  // namespace moesim
