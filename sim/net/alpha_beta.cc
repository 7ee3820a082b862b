#include "sim/net/alpha_beta.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "sim/core/checked_math.h"
#include "sim/core/duration.h"
#include "sim/core/error.h"
#include "sim/engine/interference.h"
#include "sim/net/device_copy_cost.h"
#include "sim/net/nccl_model.h"

namespace moesim {

AlphaBetaNetwork::AlphaBetaNetwork(const TaskGraph& graph, const ClusterSpec& cluster)
    : graph_(graph), cluster_(cluster) {
  if (cluster_.node.gpus_per_node < 1 || cluster_.num_nodes < 1) {
    throw InputError(cluster_.origin, "cluster " + cluster_.name +
                                          " needs at least one node and one GPU per node");
  }
  if (cluster_.node.loopback && cluster_.num_nodes != 1)
    throw InputError(cluster_.origin, "a cluster of loopback nodes is not supported (num_nodes must be 1)");
  if (graph_.world_size() > cluster_.num_gpus()) {
    throw InputError(cluster_.origin, "the job has " + std::to_string(graph_.world_size()) +
                                          " ranks but cluster " + cluster_.name + " has only " +
                                          std::to_string(cluster_.num_gpus()) + " GPUs");
  }
}

double AlphaBetaNetwork::device_copy_ns(double launches, double bytes) const {
  const GpuSpec& gpu = cluster_.node.gpu;
  const double hbm = gpu.hbm_bandwidth * gpu.hbm_efficiency / kNsPerS;
  if (!(hbm > 0.0)) throw InputError(gpu.origin, "GPU " + gpu.name + " needs a positive hbm_bandwidth");
  return launches * static_cast<double>(gpu.kernel_launch_ns) + 2.0 * bytes / hbm;
}

double AlphaBetaNetwork::all_to_all_ns(const CollectiveWork& work, const std::vector<int>& group, double& latency) const {
  const auto p = static_cast<int>(group.size());
  const std::optional<KernelFigure> measured =
      p == 1 || cluster_.node.loopback ? device_copy_figure(cluster_.node.gpu, p) : std::nullopt;
  if (p == 1) {
    const auto b = static_cast<double>(work.pair_bytes(0, 0));
    return measured ? calibrated_copy_ns(*measured, 1, b) : device_copy_ns(1, b);
  }
  if (cluster_.node.loopback) {
    // Every non-empty block, a member's own included, is one device copy on its receiver's stream:
    // the receivers copy in parallel, p copies each, all the bytes through the one GPU's memory;
    // but one host thread issues all the copies, so small exchanges wait for their launches.
    double total = 0;
    double blocks = 0;
    for (int s = 0; s < p; ++s)
      for (int d = 0; d < p; ++d) {
        const auto b = static_cast<double>(work.pair_bytes(s, d));
        total += b;
        blocks += b > 0 || !work.is_all_to_allv() ? 1 : 0;
      }
    // Measured (the loopback transport's all-to-all of p ranks): its fixed cost, whatever blocks
    // an all-to-allv leaves empty, and its bandwidth over every block's bytes.
    if (measured) return calibrated_copy_ns(*measured, 1, total);
    return std::max(device_copy_ns(blocks, 0), device_copy_ns(p, total));
  }
  // The collective ends when its slowest member does: every member counts, simulated or not (with
  // one representative rank, an unevenly placed group still has slower members elsewhere).
  const NcclGroup shape = nccl_group(group, cluster_.node.gpus_per_node);
  const NcclLinks links = nccl_links(cluster_, shape);
  double worst = 0.0;
  for (int s = 0; s < p; ++s) {
    const int r = group[static_cast<std::size_t>(s)];
    // Bytes r sends and receives over each link class; NVLink and the NIC work concurrently, and
    // links are full duplex.
    double intra_out = 0, intra_in = 0, inter_out = 0, inter_in = 0;
    for (int d = 0; d < p; ++d) {
      if (d == s) continue;
      const auto out = static_cast<double>(work.pair_bytes(s, d));
      const auto in = static_cast<double>(work.pair_bytes(d, s));
      const bool same_node = cluster_.node_of(group[static_cast<std::size_t>(d)]) == cluster_.node_of(r);
      (same_node ? intra_out : inter_out) += out;
      (same_node ? intra_in : inter_in) += in;
    }
    const double t_intra = intra_out + intra_in > 0 ? std::max(intra_out, intra_in) / links.intra : 0.0;
    const double t_inter = inter_out + inter_in > 0 ? std::max(inter_out, inter_in) / links.inter : 0.0;
    worst = std::max(worst, std::max(t_intra, t_inter));
  }
  if (!(worst > 0)) return 0.0;  // nothing moves: NCCL issues no transfer
  // Per-peer rounds: a pair pays its link class's latency when it moves bytes.
  const TimeNs intra_lat = cluster_.node.intra_node.latency_ns, inter_lat = cluster_.inter_node.latency_ns;
  const auto pair_latency = [&](int s, int d) -> TimeNs {
    if (work.pair_bytes(s, d) <= 0) return 0;
    return cluster_.node_of(group[static_cast<std::size_t>(s)]) == cluster_.node_of(group[static_cast<std::size_t>(d)])
               ? intra_lat
               : inter_lat;
  };
  const TimeNs ceiling = shape.nodes > 1 ? std::max(intra_lat, inter_lat) : intra_lat;
  latency = all_to_all_latency_ns(cluster_.node.nccl, p, pair_latency, ceiling);
  return latency + worst;
}

double AlphaBetaNetwork::tuned_ns(CollectiveOp op, std::int64_t bytes, const std::vector<int>& group,
                                  double& latency) const {
  const int p = static_cast<int>(group.size());
  if (p == 1) return 0.0;
  const double steps = op == CollectiveOp::kAllReduce ? 2.0 * (p - 1) : static_cast<double>(p - 1);
  if (cluster_.node.loopback) {
    // Each step, every member copies a 1/p slice of S = b * p: p * steps / p * S bytes in all,
    // through the one GPU's memory (the reduction's extra read is not counted). Measured: a step
    // is one round of p parallel copies, an all-to-all of p ranks p rounds, so a step costs 1/p of
    // the all-to-all's fixed cost, and its bytes move at the all-to-all's bandwidth.
    const double moved = steps * static_cast<double>(checked_mul(bytes, p));
    if (const auto measured = device_copy_figure(cluster_.node.gpu, p)) return calibrated_copy_ns(*measured, steps / p, moved);
    return device_copy_ns(steps, moved);
  }
  const NcclRun run = nccl_choice(cluster_, op, bytes, group);
  latency = run.latency_ns;
  return run.time_ns;
}

TimeNs AlphaBetaNetwork::isolated_duration(const CollectiveWork& work, const std::vector<int>& group) const {
  return cost(work, group).first;
}

std::pair<TimeNs, TimeNs> AlphaBetaNetwork::cost(const CollectiveWork& work, const std::vector<int>& group) const {
  if (work.bytes_per_peer < 0) throw InputError("collective size must not be negative");
  MOESIM_CHECK(!group.empty(), "collective over an empty group");
  for (int r : group) {
    if (r < 0 || r >= cluster_.num_gpus()) {
      throw InputError(cluster_.origin, "group member " + std::to_string(r) + " is outside cluster " +
                                            cluster_.name + " (" + std::to_string(cluster_.num_gpus()) +
                                            " GPUs)");
    }
  }
  if (work.is_all_to_allv() &&
      (work.op != CollectiveOp::kAllToAll || work.traffic->size != static_cast<int>(group.size())))
    throw InputError("a traffic matrix of " + std::to_string(work.traffic->size) + " ranks on a " +
                     std::string(to_string(work.op)) + " over " + std::to_string(group.size()) +
                     " ranks: all-to-allv needs one row and column per group member");
  const auto key = std::make_tuple(static_cast<int>(work.op), group, work.bytes_per_peer, work.traffic,
                                   work.transposed);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  double latency = 0;  // device copies (one rank, loopback nodes) have none: they share the GPU throughout
  const double ns = work.op == CollectiveOp::kAllToAll ? all_to_all_ns(work, group, latency)
                                                       : tuned_ns(work.op, work.bytes_per_peer, group, latency);
  const bool moves_bytes = work.is_all_to_allv() ? ns > 0 : work.bytes_per_peer > 0;
  const TimeNs t = to_duration_ns(ns, moves_bytes && group.size() > 1,
                                  "a " + std::string(to_string(work.op)) + " of " +
                                      std::to_string(work.bytes_per_peer) + " bytes per peer");
  const std::pair<TimeNs, TimeNs> c{t, std::min(t, static_cast<TimeNs>(std::llround(latency)))};
  cache_.emplace(key, c);
  return c;
}

double AlphaBetaNetwork::factor(TaskIndex task, const Concurrency& concurrency) const {
  // Collectives running at once on a rank (dispatch and combine on their own streams) share its
  // links: each gets 1/k of the bandwidth on top of the interference factor. The flow model
  // resolves this per link; here it is per rank.
  int sharing = 1;
  if (cluster_.node.loopback) {
    // One node is one GPU (loader rule): every running collective copies through its memory
    // (start() and on_concurrency_change() then update them all).
    sharing = static_cast<int>(ranks_.size());
  } else {
    for (int r : ranks_.at(task)) {
      const int comm = concurrency.busy(r, StreamClass::kCommDispatch) +
                       concurrency.busy(r, StreamClass::kCommCombine) + concurrency.busy(r, StreamClass::kCommGrad) +
                       concurrency.busy(r, StreamClass::kCommPipeline);
      sharing = std::max(sharing, comm);
    }
  }
  return interference_factor(cluster_.node.interference, graph_.task(task).stream, ranks_.at(task),
                             concurrency) /
         static_cast<double>(sharing);
}

void AlphaBetaNetwork::start(TaskIndex task, TimeNs now, const Concurrency& concurrency) {
  const Task& t = graph_.task(task);
  const auto* work = std::get_if<CollectiveWork>(&t.work);
  MOESIM_CHECK(work != nullptr, "AlphaBetaNetwork started a non-collective task '" + t.id + "'");
  ranks_[task] = graph_.ranks_of(task);
  // NCCL's latency holds no link: it elapses whatever the sharing and interference; the bytes
  // progress at the collective's rate.
  const auto [total, latency] = cost(*work, graph_.group(work->group));
  activities_.add(task, total - latency, now, factor(task, concurrency), latency);
  // On a loopback node one more collective shares the GPU's memory, even when the busy counts
  // look the same as before (one collective ended and another started at this instant).
  if (cluster_.node.loopback) rerate_all(now, concurrency);
}

void AlphaBetaNetwork::rerate_all(TimeNs now, const Concurrency& concurrency) {
  for (const auto& entry : ranks_) activities_.set_rate(entry.first, factor(entry.first, concurrency), now);
}

void AlphaBetaNetwork::on_concurrency_change(std::span<const int> ranks, TimeNs now,
                                             const Concurrency& concurrency) {
  if (cluster_.node.loopback) {  // every collective shares the one GPU with every other task
    rerate_all(now, concurrency);
    return;
  }
  for (const auto& [task, members] : ranks_) {
    const bool affected = std::any_of(members.begin(), members.end(), [&](int r) {
      return std::binary_search(ranks.begin(), ranks.end(), r);
    });
    if (affected) activities_.set_rate(task, factor(task, concurrency), now);
  }
}

void AlphaBetaNetwork::advance_to(TimeNs now, std::vector<TaskIndex>& finished) {
  const std::size_t first = finished.size();
  activities_.advance_to(now, finished);
  for (std::size_t i = first; i < finished.size(); ++i) ranks_.erase(finished[i]);
}

}  // namespace moesim
