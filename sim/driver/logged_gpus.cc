#include "sim/driver/logged_gpus.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "sim/core/error.h"

namespace moesim {

std::vector<int> first_gpus(int n) {
  std::vector<int> gpus(static_cast<std::size_t>(std::max(n, 0)));
  std::iota(gpus.begin(), gpus.end(), 0);
  return gpus;
}

int nodes_holding(const ClusterSpec& cluster, const std::vector<int>& gpus) {
  std::set<int> nodes;
  for (int g : gpus) nodes.insert(cluster.node_of(g));
  return static_cast<int>(nodes.size());
}

LoggedShape shape_of_log(const NcclTestsLog& log, int ranks_if_unlisted) {
  if (log.placement.empty()) return LoggedShape{ranks_if_unlisted, 1, 0};
  std::set<std::string> hosts;
  for (const NcclTestsRank& r : log.placement) hosts.insert(r.host);
  return LoggedShape{static_cast<int>(log.placement.size()), static_cast<int>(hosts.size()), log.placement.back().line};
}

std::string alltoall_shape_mismatch(const LoggedShape& shape, const ClusterSpec& cluster) {
  const auto count = [](int n, const std::string& what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  const std::string ran = "the all-to-all ran on " + count(shape.ranks, "rank") + " on " + count(shape.hosts, "host");
  if (shape.hosts <= 1) {
    const NodeSpec& node = cluster.node;
    if (shape.ranks == node.gpus_per_node) return "";
    return ran + " and node '" + node.name + "' (" + node.origin.to_string() + ") has " +
           count(node.gpus_per_node, "GPU") + ": a one-node log calibrates the links of the whole node, and " +
           "part of it shares them otherwise";
  }
  if (shape.hosts == cluster.num_nodes && shape.ranks == cluster.num_gpus()) return "";
  return ran + " and '" + cluster.name + "' (" + cluster.origin.to_string() + ") has " +
         count(cluster.num_gpus(), "GPU") + " on " + count(cluster.num_nodes, "node") +
         ": a log across nodes calibrates the inter-node network of the whole cluster, and part of it (fewer GPUs "
         "to a NIC, fewer nodes on the fabric) reaches more per GPU";
}

LoggedGpus gpus_of_log(const NcclTestsLog& log, const ClusterSpec& cluster, int ranks_if_unlisted) {
  const SourceLocation file{log.file, 0, 0};
  LoggedGpus out;
  if (log.placement.empty()) {
    if (ranks_if_unlisted <= 0) throw InputError(file, "the log has no '#  Rank' lines to count its GPUs; give --ranks");
    if (ranks_if_unlisted > cluster.node.gpus_per_node) {
      throw InputError(file, "the log has no '#  Rank' lines, so its " + std::to_string(ranks_if_unlisted) +
                                 " ranks are taken as GPUs of one node, and node '" + cluster.node.name + "' has " +
                                 std::to_string(cluster.node.gpus_per_node) +
                                 "; a log across nodes needs the lines that name each rank's host");
    }
    out.gpus = first_gpus(ranks_if_unlisted);
    return out;
  }
  for (std::size_t i = 0; i < log.placement.size(); ++i) {
    if (log.placement[i].rank != static_cast<int>(i)) {
      throw InputError(SourceLocation{log.file, log.placement[i].line, 1},
                       "rank " + std::to_string(log.placement[i].rank) + " is listed but rank " + std::to_string(i) +
                           " is not: the '#  Rank' lines must cover ranks 0 to " +
                           std::to_string(log.placement.size() - 1));
    }
  }
  // Hosts become nodes in the order of their lowest rank.
  std::vector<std::string> hosts;
  std::map<std::string, std::size_t> node_of_host;
  std::vector<std::vector<const NcclTestsRank*>> ranks_of_host;
  for (const NcclTestsRank& r : log.placement) {
    const auto [it, fresh] = node_of_host.emplace(r.host, hosts.size());
    if (fresh) {
      hosts.push_back(r.host);
      ranks_of_host.emplace_back();
    }
    ranks_of_host[it->second].push_back(&r);
  }
  const NodeSpec& node = cluster.node;
  if (static_cast<int>(hosts.size()) > cluster.num_nodes) {
    std::string names;
    for (std::size_t h = 0; h < hosts.size() && h < 3; ++h) names += (h ? ", " : "") + hosts[h];
    throw InputError(file, "the log ran on " + std::to_string(hosts.size()) + " hosts (" + names +
                               (hosts.size() > 3 ? ", ..." : "") + ") and '" + cluster.name + "' (" +
                               cluster.origin.to_string() + ") has " + std::to_string(cluster.num_nodes) +
                               " node" + (cluster.num_nodes == 1 ? "" : "s") +
                               ": give --hardware a cluster of at least that many of its nodes");
  }
  out.gpus.resize(log.placement.size());
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    const auto& ranks = ranks_of_host[h];
    std::set<int> devices;
    bool by_device = true;
    for (const NcclTestsRank* r : ranks) by_device = by_device && r->device >= 0 && devices.insert(r->device).second;
    const std::string host = hosts[h].empty() ? "the ranks without a host" : "host " + hosts[h];
    if (!by_device) {
      if (static_cast<int>(ranks.size()) > node.gpus_per_node) {
        throw InputError(file, host + " ran " + std::to_string(ranks.size()) + " ranks and node '" + node.name +
                                   "' has " + std::to_string(node.gpus_per_node) + " GPUs");
      }
      out.notes.push_back(host + ": its ranks name no device or repeat one (one process per GPU, each seeing only "
                          "its own?); they are taken as GPUs 0 to " + std::to_string(ranks.size() - 1) + " of node " +
                          std::to_string(h));
    }
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const NcclTestsRank& r = *ranks[i];
      const int local = by_device ? r.device : static_cast<int>(i);
      if (local >= node.gpus_per_node) {
        throw InputError(SourceLocation{log.file, r.line, 1},
                         "rank " + std::to_string(r.rank) + " ran on device " + std::to_string(local) + " and node '" +
                             node.name + "' (" + node.origin.to_string() + ") has " +
                             std::to_string(node.gpus_per_node) + " GPUs");
      }
      out.gpus[static_cast<std::size_t>(r.rank)] = static_cast<int>(h) * node.gpus_per_node + local;
    }
  }
  return out;
}

}  // namespace moesim
