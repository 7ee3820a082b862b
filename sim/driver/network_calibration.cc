#include "sim/driver/network_calibration.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/net/topology.h"
#include "sim/spec/yaml_text.h"

namespace moesim {

AllToAllLine fit_all_to_all(const std::vector<AllToAllPoint>& points, int ranks) {
  if (ranks < 2) throw InputError("an all-to-all calibration needs at least 2 ranks, got " + std::to_string(ranks));
  std::set<std::int64_t> sizes;
  for (const AllToAllPoint& p : points) {
    if (p.bytes_per_peer <= 0 || !(p.time_ns > 0))
      throw InputError("an all-to-all point needs positive bytes and time, got " + std::to_string(p.bytes_per_peer) +
                       " bytes in " + std::to_string(p.time_ns) + " ns");
    sizes.insert(p.bytes_per_peer);
  }
  if (sizes.size() < 2)
    throw InputError("an all-to-all calibration needs at least two message sizes, got " + std::to_string(sizes.size()));
  // t = L + s x with x = (ranks - 1) b, s = 1 / bandwidth (ns per byte), weights 1 / t^2.
  double w = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const AllToAllPoint& p : points) {
    const double x = static_cast<double>(ranks - 1) * static_cast<double>(p.bytes_per_peer);
    const double wi = 1.0 / (p.time_ns * p.time_ns);
    w += wi;
    sx += wi * x;
    sy += wi * p.time_ns;
    sxx += wi * x * x;
    sxy += wi * x * p.time_ns;
  }
  AllToAllLine line;
  double slope = (w * sxy - sx * sy) / (w * sxx - sx * sx);
  line.latency_ns = (sy - slope * sx) / w;
  if (line.latency_ns < 0) {  // through the origin instead
    slope = sxy / sxx;
    line.latency_ns = 0;
    line.latency_clamped = true;
  }
  if (!(slope > 0))
    throw InputError("the all-to-all times do not grow with the message size, so no bandwidth fits them");
  line.bandwidth = 1e9 / slope;
  return line;
}

namespace {

// The model's own times for the measured sizes.
std::vector<AllToAllPoint> model_points(const ClusterSpec& cluster, int ranks, NetworkModel model,
                                        const std::vector<AllToAllPoint>& measured) {
  std::vector<int> group(static_cast<std::size_t>(ranks));
  std::iota(group.begin(), group.end(), 0);
  const TaskGraph graph(ranks, group);
  const auto net = make_collective_model(graph, cluster, NetworkChoice{model, AllToAllAlgorithm::kPairwise});
  std::vector<AllToAllPoint> out;
  for (const AllToAllPoint& p : measured) {
    const TimeNs t = net->isolated_duration(CollectiveWork{CollectiveOp::kAllToAll, 0, p.bytes_per_peer}, group);
    out.push_back(AllToAllPoint{p.bytes_per_peer, static_cast<double>(t)});
  }
  return out;
}

double max_relative_error(const std::vector<AllToAllPoint>& model, const std::vector<AllToAllPoint>& measured) {
  double worst = 0;
  for (std::size_t i = 0; i < model.size(); ++i)
    worst = std::max(worst, std::abs(model[i].time_ns - measured[i].time_ns) / measured[i].time_ns);
  return worst;
}

// How much faster (k) and how much later (shift, ns) the model's line must become to be the
// measured one.
struct Correction {
  double bandwidth_factor = 1;
  double latency_shift_ns = 0;
};

Correction correction(const AllToAllLine& measured, const std::vector<AllToAllPoint>& model_times, int ranks) {
  const AllToAllLine model = fit_all_to_all(model_times, ranks);
  return Correction{measured.bandwidth / model.bandwidth, measured.latency_ns - model.latency_ns};
}

// `latency` + `shift_ns`, at least 0 (a note when more than rounding had to be cut off).
TimeNs shifted(TimeNs latency, double shift_ns, const std::string& what, std::vector<std::string>& notes) {
  const double v = static_cast<double>(latency) + shift_ns;
  if (v < -1.0) notes.push_back(what + ": the measured latency is below what the model adds elsewhere; set to 0");
  return v < 0 ? 0 : static_cast<TimeNs>(std::llround(v));
}

// The topology link types on the routes between GPUs 0..ranks-1 (the all-to-all's), and those of
// them that also carry the GPUs' traffic to their NICs (inter-node traffic sees the calibration).
struct RouteTypes {
  std::set<std::string> intra, also_to_nic;
};

RouteTypes route_link_types(const ClusterSpec& cluster, int ranks) {
  const ClusterTopology topo(cluster);
  RouteTypes out;
  std::vector<LinkId> route;
  for (int a = 0; a < ranks; ++a)
    for (int b = 0; b < ranks; ++b) {
      if (a == b) continue;
      route.clear();
      topo.route(a, b, route);
      for (LinkId id : route)
        for (const std::string& t : topo.link_types_of(id)) out.intra.insert(t);
    }
  for (int g = 0; g < ranks && topo.nics_per_node() > 0; ++g)
    for (int slot : topo.to_nic(g))
      for (const std::string& t : topo.link_types_of(topo.local_link(0, slot)))
        if (out.intra.count(t)) out.also_to_nic.insert(t);
  return out;
}

}  // namespace

void check_intra_node_ranks(const ClusterSpec& cluster, int ranks) {
  const NodeSpec& node = cluster.node;
  if (node.loopback)
    throw InputError("node '" + node.name + "' is a loopback node: its ranks share one GPU and have no network");
  if (node.gpus_per_node < 2)
    throw InputError("'" + node.name + "' has one GPU: there is no network between GPUs to calibrate; give its node");
  if (ranks < 2 || ranks > node.gpus_per_node) {
    throw InputError("the all-to-all ran on " + std::to_string(ranks) + " GPUs; an intra-node calibration of node '" +
                     node.name + "' needs 2 to " + std::to_string(node.gpus_per_node) +
                     " GPUs of one node (inter-node links are not calibrated from measurements yet)");
  }
}

IntraNodeCalibration calibrate_intra_node(const ClusterSpec& cluster, int ranks,
                                          const std::vector<AllToAllPoint>& points) {
  check_intra_node_ranks(cluster, ranks);
  const NodeSpec& node = cluster.node;
  IntraNodeCalibration cal;
  cal.measured = fit_all_to_all(points, ranks);
  if (cal.measured.latency_clamped)
    cal.notes.push_back("the fitted latency came out negative, so the line was fitted through 0 latency");

  // Alpha-beta: the intra_node link.
  const Correction ab = correction(cal.measured, model_points(cluster, ranks, NetworkModel::kAlphaBeta, points), ranks);
  cal.intra_node.bandwidth = node.intra_node.effective_bandwidth() * ab.bandwidth_factor;
  cal.intra_node.efficiency = 1.0;
  cal.intra_node.latency_ns = shifted(node.intra_node.latency_ns, ab.latency_shift_ns, "intra_node.latency", cal.notes);
  ClusterSpec calibrated = cluster;
  calibrated.node.intra_node = cal.intra_node;
  cal.alpha_beta_max_error =
      max_relative_error(model_points(calibrated, ranks, NetworkModel::kAlphaBeta, points), points);

  // Flow: every link type on the GPUs' routes, bandwidth x k and latency + d. When the routes'
  // latencies differ, flows that share a link start at different times and the model's line does
  // not move by exactly (k, d); a few secant steps on (k, d) against the model's own line settle it.
  if (node.topology.present) {
    const RouteTypes types = route_link_types(cluster, ranks);
    for (const std::string& type : types.also_to_nic)
      cal.notes.push_back("link type " + type + " also joins the GPUs to their NICs: inter-node traffic sees its "
                          "calibrated value too");
    Correction total;
    std::vector<std::string> clamped;
    for (int step = 0; step < 8; ++step) {
      const Correction c = correction(cal.measured, model_points(calibrated, ranks, NetworkModel::kFlow, points), ranks);
      if (step > 0 && std::abs(c.bandwidth_factor - 1) < 1e-6 && std::abs(c.latency_shift_ns) < 1.0) break;
      total.bandwidth_factor *= c.bandwidth_factor;
      total.latency_shift_ns += c.latency_shift_ns;
      clamped.clear();
      for (const std::string& type : types.intra) {
        LinkSpec link = node.topology.link_types.at(type);
        link.bandwidth *= total.bandwidth_factor;
        link.latency_ns = shifted(link.latency_ns, total.latency_shift_ns, "link_types." + type + ".latency", clamped);
        cal.link_types[type] = link;
        calibrated.node.topology.link_types[type] = link;
      }
    }
    cal.notes.insert(cal.notes.end(), clamped.begin(), clamped.end());
    cal.flow_max_error = max_relative_error(model_points(calibrated, ranks, NetworkModel::kFlow, points), points);
  }
  return cal;
}

namespace {

std::string link_yaml(const LinkSpec& l) {
  return "{bandwidth: " + yaml_fixed(l.bandwidth / 1e9, 4) + " GB/s, efficiency: " + yaml_fixed(l.efficiency, 4) +
         ", latency: " + yaml_fixed(static_cast<double>(l.latency_ns) / 1e3, 3) + " us}";
}

}  // namespace

std::string network_calibration_yaml(const IntraNodeCalibration& cal, int ranks,
                                     const std::vector<AllToAllPoint>& points, const std::string& source) {
  std::ostringstream y;
  y << "# Intra-node network fitted to a measured all-to-all of " << ranks << " GPUs: t = "
    << yaml_fixed(cal.measured.latency_ns / 1e3, 3) << " us + (ranks - 1) x bytes per peer / "
    << yaml_fixed(cal.measured.bandwidth / 1e9, 3) << " GB/s (docs/calibration.md).\n"
    << "# Calibrated models against the measurement, worst point: alpha-beta "
    << yaml_fixed(100 * cal.alpha_beta_max_error, 1) << "%";
  if (!cal.link_types.empty()) y << ", flow " << yaml_fixed(100 * cal.flow_max_error, 1) << "%";
  y << ".\n";
  for (const std::string& note : cal.notes) y << "# note: " << note << "\n";
  y << "intra_node: " << link_yaml(cal.intra_node) << "\n";
  if (!cal.link_types.empty()) {
    y << "link_types:\n";
    for (const auto& [type, link] : cal.link_types) y << "  " << type << ": " << link_yaml(link) << "\n";
  }
  y << "all_to_all:\n  ranks: " << ranks << "\n  source: " << yaml_quoted(source) << "\n  bytes_per_peer: [";
  for (std::size_t i = 0; i < points.size(); ++i) y << (i ? ", " : "") << points[i].bytes_per_peer;
  y << "]\n  time_us: [";
  for (std::size_t i = 0; i < points.size(); ++i) y << (i ? ", " : "") << yaml_fixed(points[i].time_ns / 1e3, 3);
  y << "]\n";
  return y.str();
}

}  // namespace moesim
