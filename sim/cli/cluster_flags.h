// --gpus N and --nodes N: a cluster preset grown or shrunk to N GPUs (whole nodes) or N nodes, for
// `moesim simulate`, `graph export` and `plan` (the sweep's gpus axis does the same per value).
#pragma once

#include "sim/spec/hardware_spec.h"

namespace moesim::cli {

// `cluster` unchanged when both are 0; InputError naming the flag when both are given, when N GPUs
// are not whole nodes, or when the preset cannot have several nodes (no inter_node link, loopback).
ClusterSpec scaled_cluster(const ClusterSpec& cluster, long long gpus, long long nodes);

}  // namespace moesim::cli
