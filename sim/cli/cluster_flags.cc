#include "sim/cli/cluster_flags.h"

#include <string>

#include "sim/core/error.h"

namespace moesim::cli {

ClusterSpec scaled_cluster(const ClusterSpec& cluster, long long gpus, long long nodes) {
  if (gpus > 0 && nodes > 0) throw InputError("give --gpus or --nodes, not both");
  if (gpus > 0) return with_gpus(cluster, gpus, SourceLocation{}, "--gpus");
  if (nodes > 0) {
    if (nodes > kMaxClusterNodes)
      throw InputError("--nodes = " + std::to_string(nodes) + " is more than the limit of " +
                       std::to_string(kMaxClusterNodes) + " nodes");
    return with_gpus(cluster, nodes * cluster.node.gpus_per_node, SourceLocation{},
                     "--nodes " + std::to_string(nodes) + ": GPUs");
  }
  return cluster;
}

}  // namespace moesim::cli
