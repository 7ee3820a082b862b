#include "sim/driver/network_calibration.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/net/topology.h"
#include "sim/spec/yaml_text.h"

namespace moesim {

namespace {

// The model's own times for the measured sizes.
std::vector<AllToAllPoint> model_points(const ClusterSpec& cluster, const std::vector<int>& group, NetworkModel model,
                                        const std::vector<AllToAllPoint>& measured) {
  const TaskGraph graph(cluster.num_gpus(), group);
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

// A bandwidth factor k and a latency shift d (ns): how much faster and later a model's line must
// become, or the accumulated change made to the links that move.
struct Correction {
  double bandwidth_factor = 1;
  double latency_shift_ns = 0;
};

// The sizes where bandwidth sets the time: those whose measured time is at least twice `latency_ns`
// (all of them at latency 0); empty when fewer than two distinct sizes qualify.
std::vector<std::size_t> bandwidth_bound(const std::vector<AllToAllPoint>& points, double latency_ns) {
  std::vector<std::size_t> out;
  std::set<std::int64_t> sizes;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (points[i].time_ns >= 2 * latency_ns) {
      out.push_back(i);
      sizes.insert(points[i].bytes_per_peer);
    }
  }
  if (sizes.size() < 2) out.clear();
  return out;
}

// The bandwidth of a line fitted (latency free) to `points` at `which` only.
double bandwidth_at(const std::vector<AllToAllPoint>& points, const std::vector<std::size_t>& which, int ranks) {
  std::vector<AllToAllPoint> some;
  for (std::size_t i : which) some.push_back(points[i]);
  return fit_all_to_all(some, ranks).bandwidth;
}

// `latency` + `shift_ns`, at least 0 (a note when more than rounding had to be cut off).
TimeNs shifted(TimeNs latency, double shift_ns, const std::string& what, std::vector<std::string>& notes) {
  const double v = static_cast<double>(latency) + shift_ns;
  if (v < -1.0) notes.push_back(what + ": the measured latency is below what the model adds elsewhere; set to 0");
  return v < 0 ? 0 : static_cast<TimeNs>(std::llround(v));
}

// `link` made k times faster and d later: the line rate scaled, its efficiency kept.
LinkSpec corrected(const LinkSpec& link, const Correction& total, const std::string& what,
                   std::vector<std::string>& notes) {
  LinkSpec out = link;
  out.bandwidth *= total.bandwidth_factor;
  out.latency_ns = shifted(link.latency_ns, total.latency_shift_ns, what, notes);
  return out;
}

// The same for an alpha-beta link, whose measured bandwidth is what it reaches: efficiency 1.
LinkSpec corrected_effective(const LinkSpec& link, const Correction& total, const std::string& what,
                             std::vector<std::string>& notes) {
  LinkSpec out = corrected(link, total, what, notes);
  out.bandwidth = link.effective_bandwidth() * total.bandwidth_factor;
  out.efficiency = 1.0;
  return out;
}

// Sets the parameters a calibration moves to their values for the accumulated correction `total`
// (bandwidth factors multiplied, shifts added), noting clamped latencies; returns how many links it
// set.
using Adjust = std::function<int(ClusterSpec&, const Correction& total, std::vector<std::string>& notes)>;

// Moves `adjust`'s parameters until `model`'s line for the all-to-all among `group` is `measured`
// and returns the worst point's relative error.
//
// A correction of the model's line moves it by about itself where the links that move set the
// times, so corrections are repeated until one is negligible. Two things stop that short:
//   - A faster link may not make the model faster: NIC ports beyond the PCIe link that feeds
//     them. Each speed-up is tried first; where the model's bandwidth gains less than half of
//     what was asked, the factor is set to the smallest that reaches the model's plateau (found
//     by bisection) and kept, instead of growing without bound.
//   - Latencies cut to 0 (the measured latency is below what the model adds elsewhere) cannot
//     follow any more; once every link that moves is at 0, bandwidths are compared over the sizes
//     whose measured time is at least twice both latencies, so that the unreachable latency does
//     not bend the fitted bandwidth.
// Either way a note says how far off the model stays at its worst size. Only speed-ups above 1%
// are tried first (the model's times are whole nanoseconds, so a tiny one may not show). A
// bandwidth moved more than 4 times either way gets a note too: the log is probably not of
// --hardware.
double match_model_line(ClusterSpec& cluster, const std::vector<int>& group, NetworkModel model,
                        const std::vector<AllToAllPoint>& points, const AllToAllLine& measured,
                        const std::string& what, const Adjust& adjust, std::vector<std::string>& notes) {
  const int ranks = static_cast<int>(group.size());
  std::vector<std::string> clamped;
  bool bandwidth_capped = false;
  bool latency_lost = false;  // every moved link's latency is cut to 0
  double target_bw = measured.bandwidth;
  std::vector<AllToAllPoint> times;  // the model's, at the last correction tried
  // The model's line with the links moved by `c` (which stay so in `cluster`). Once the latency is
  // lost, its bandwidth, and the measured one it must reach (`target_bw`), are those of the sizes
  // that both the measurement and the model spend mostly on bandwidth.
  const auto line_with = [&](const Correction& c) {
    clamped.clear();
    const int links = adjust(cluster, c, clamped);
    latency_lost = links > 0 && static_cast<int>(clamped.size()) == links;
    times = model_points(cluster, group, model, points);
    AllToAllLine line = fit_all_to_all(times, ranks);
    target_bw = measured.bandwidth;
    if (latency_lost) {
      const std::vector<std::size_t> bound = bandwidth_bound(points, std::max(measured.latency_ns, line.latency_ns));
      if (!bound.empty()) {
        line.bandwidth = bandwidth_at(times, bound, ranks);
        target_bw = bandwidth_at(points, bound, ranks);
      }
    }
    return line;
  };
  Correction total;
  bool settled = false;
  // A link's latency enters the model's all-to-all once per round of peers that crosses it (NCCL
  // runs one round per peer, nccl_model.h), so the model's latency moves by a multiple of a shift:
  // the slope of the last two tries (a secant), 1 until there are two.
  double last_shift = 0, last_latency = 0;
  for (int step = 0; step < 16 && !settled; ++step) {
    const AllToAllLine now = line_with(total);
    const double k = bandwidth_capped ? 1.0 : target_bw / now.bandwidth;
    const double d = measured.latency_ns - now.latency_ns;
    double slope = 1.0;
    if (step > 0 && std::abs(total.latency_shift_ns - last_shift) > 1.0)
      slope = std::max(1.0, (now.latency_ns - last_latency) / (total.latency_shift_ns - last_shift));
    last_shift = total.latency_shift_ns;
    last_latency = now.latency_ns;
    settled = std::abs(k - 1) < 1e-6 && std::abs(d) < 1.0;
    if (k > 1.01) {
      Correction trial = total;
      trial.bandwidth_factor *= k;
      const double reached = line_with(trial).bandwidth;
      if (std::log(reached / now.bandwidth) < 0.5 * std::log(k)) {
        // The smallest factor (bisected in log space) whose model bandwidth is within 0.1% of
        // the trial's: as far as these links still help.
        double near = total.bandwidth_factor, far = trial.bandwidth_factor;
        for (int i = 0; i < 30; ++i) {
          Correction c = total;
          c.bandwidth_factor = std::sqrt(near * far);
          (std::abs(line_with(c).bandwidth - reached) <= 1e-3 * reached ? far : near) = c.bandwidth_factor;
        }
        total.bandwidth_factor = far;
        bandwidth_capped = true;
      } else {
        total.bandwidth_factor = trial.bandwidth_factor;
      }
    } else if (!bandwidth_capped) {
      total.bandwidth_factor *= k;
    }
    total.latency_shift_ns += d / slope;
  }
  line_with(total);  // leaves `cluster`, `clamped` and `times` at the final correction
  notes.insert(notes.end(), clamped.begin(), clamped.end());
  const double worst = max_relative_error(times, points);
  if (worst > 1e-3 && (bandwidth_capped || latency_lost || !settled)) {
    std::size_t at = 0;
    for (std::size_t i = 0; i < points.size(); ++i)
      if (std::abs(times[i].time_ns / points[i].time_ns - 1) >= std::abs(times[at].time_ns / points[at].time_ns - 1)) at = i;
    const double r = times[at].time_ns / points[at].time_ns - 1;
    std::string why;
    if (bandwidth_capped) why = "faster links no longer speed the model up";
    if (latency_lost) why += std::string(why.empty() ? "" : ", and ") + "its latencies are cut to 0";
    if (why.empty()) why = "the corrections did not settle";
    notes.push_back(what + ": moving " + (model == NetworkModel::kFlow ? "these links" : "this link") +
                    " cannot make the model's line the measured one (" + why + "); at its worst, " +
                    std::to_string(points[at].bytes_per_peer) + " bytes per peer, the model is " +
                    yaml_fixed(100 * std::abs(r), 1) + "% " + (r > 0 ? "slower" : "faster") + " than measured");
  }
  if (total.bandwidth_factor > 4 || total.bandwidth_factor < 0.25) {
    notes.push_back(what + ": the calibrated bandwidth is " + yaml_fixed(total.bandwidth_factor, 2) +
                    " times --hardware's; check that the log was measured on that hardware");
  }
  return worst;
}

// The topology link types on the routes among `gpus` (the all-to-all's), and those of them that
// also carry the GPUs' traffic to their NICs (inter-node traffic sees the calibration).
struct RouteTypes {
  std::set<std::string> intra, also_to_nic;
};

RouteTypes route_link_types(const ClusterSpec& cluster, const std::vector<int>& gpus) {
  const ClusterTopology topo(cluster);
  RouteTypes out;
  std::vector<LinkId> route;
  for (int a : gpus)
    for (int b : gpus) {
      if (a == b) continue;
      route.clear();
      topo.route(a, b, route);
      for (LinkId id : route)
        for (const std::string& t : topo.link_types_of(id)) out.intra.insert(t);
    }
  for (int g : gpus) {
    if (topo.nics_per_node() == 0) break;
    for (int slot : topo.to_nic(g % topo.gpus_per_node()))
      for (const std::string& t : topo.link_types_of(topo.local_link(0, slot)))
        if (out.intra.count(t)) out.also_to_nic.insert(t);
  }
  return out;
}

void calibrate_intra_node(ClusterSpec calibrated, const std::vector<int>& group, const std::vector<AllToAllPoint>& points,
                          NetworkCalibration& cal) {
  const NodeSpec base = calibrated.node;
  cal.alpha_beta_max_error = match_model_line(
      calibrated, group, NetworkModel::kAlphaBeta, points, cal.measured, "alpha-beta intra_node",
      [&](ClusterSpec& c, const Correction& total, std::vector<std::string>& notes) {
        c.node.intra_node = corrected_effective(base.intra_node, total, "intra_node.latency", notes);
        return 1;
      },
      cal.notes);
  cal.intra_node = calibrated.node.intra_node;
  // Flow: every link type on the GPUs' routes.
  if (!base.topology.present) return;
  const RouteTypes types = route_link_types(calibrated, group);
  for (const std::string& type : types.also_to_nic)
    cal.notes.push_back("link type " + type + " also joins the GPUs to their NICs: inter-node traffic sees its "
                        "calibrated value too");
  cal.flow_max_error = match_model_line(
      calibrated, group, NetworkModel::kFlow, points, cal.measured, "flow link types",
      [&](ClusterSpec& c, const Correction& total, std::vector<std::string>& notes) {
        for (const std::string& type : types.intra)
          c.node.topology.link_types[type] =
              corrected(base.topology.link_types.at(type), total, "link_types." + type + ".latency", notes);
        return static_cast<int>(types.intra.size());
      },
      cal.notes);
  for (const std::string& type : types.intra) cal.link_types[type] = calibrated.node.topology.link_types.at(type);
}

void calibrate_inter_node(ClusterSpec calibrated, const std::vector<int>& group, const std::vector<AllToAllPoint>& points,
                          NetworkCalibration& cal) {
  const ClusterSpec base = calibrated;
  cal.alpha_beta_max_error = match_model_line(
      calibrated, group, NetworkModel::kAlphaBeta, points, cal.measured, "alpha-beta inter_node",
      [&](ClusterSpec& c, const Correction& total, std::vector<std::string>& notes) {
        c.inter_node = corrected_effective(base.inter_node, total, "inter_node.latency", notes);
        return 1;
      },
      cal.notes);
  cal.inter_node_link = calibrated.inter_node;
  // The alpha-beta model gives each GPU its own inter_node link. Where the measured GPUs had NICs
  // to themselves that a full node's GPUs share, what they reached is more than each GPU of a full
  // node gets, and the file would overstate it there.
  const NodeSpec& node = base.node;
  const bool by_nic = node.topology.present && node.topology.num_nics > 0 &&
                      node.topology.gpu_nic.size() == static_cast<std::size_t>(node.gpus_per_node);
  const auto nic_of = [&](int local) { return by_nic ? node.topology.gpu_nic[static_cast<std::size_t>(local)] : 0; };
  std::map<std::pair<int, int>, int> logged_per_nic;  // (node, NIC) -> measured GPUs on it
  std::map<int, int> node_per_nic;                    // NIC -> the node's GPUs on it
  int logged_most = 0, node_most = 0;
  for (int g : group) logged_most = std::max(logged_most, ++logged_per_nic[{base.node_of(g), nic_of(g % node.gpus_per_node)}]);
  for (int local = 0; local < node.gpus_per_node; ++local) node_most = std::max(node_most, ++node_per_nic[nic_of(local)]);
  if (logged_most < node_most) {
    cal.notes.push_back(
        by_nic
            ? "the measured GPUs shared their NICs at most " + std::to_string(logged_most) + " to a NIC, and a full node's " +
                  std::to_string(node_most) + ": the alpha-beta inter_node (one link per GPU) is what these GPUs "
                  "reached, more than each GPU of a full node gets; fit a log of full nodes for full-node simulations"
            : "the log used " + std::to_string(logged_most) + " GPUs of a node and '" + node.name + "' has " +
                  std::to_string(node_most) + ": if they share NICs, the alpha-beta inter_node (one link per GPU) "
                  "overstates what each GPU of a full node gets; fit a log of full nodes for full-node simulations");
  }
  if (!base.node.topology.present || !base.fabric.present) {
    cal.notes.push_back("the flow model is not calibrated: cluster '" + base.name + "' has no " +
                        (base.node.topology.present ? "fabric" : "node topology") + " section");
    return;
  }
  cal.flow_max_error = match_model_line(
      calibrated, group, NetworkModel::kFlow, points, cal.measured, "flow nic_port",
      [&](ClusterSpec& c, const Correction& total, std::vector<std::string>& notes) {
        c.node.topology.nic_port = corrected(base.node.topology.nic_port, total, "nic_port.latency", notes);
        return 1;
      },
      cal.notes);
  cal.nic_port = calibrated.node.topology.nic_port;
}

}  // namespace

void check_has_network(const ClusterSpec& cluster) {
  const NodeSpec& node = cluster.node;
  if (node.loopback)
    throw InputError("node '" + node.name + "' is a loopback node: its ranks share one GPU and have no network");
  if (cluster.num_gpus() < 2)
    throw InputError("'" + node.name + "' has one GPU: there is no network between GPUs to calibrate; give its node");
}

void check_network_gpus(const ClusterSpec& cluster, const std::vector<int>& gpus) {
  check_has_network(cluster);
  if (gpus.size() < 2)
    throw InputError("an all-to-all calibration needs at least 2 GPUs, got " + std::to_string(gpus.size()));
  if (static_cast<int>(gpus.size()) > cluster.num_gpus()) {
    throw InputError("the all-to-all ran on " + std::to_string(gpus.size()) + " GPUs and '" + cluster.name + "' (" +
                     cluster.origin.to_string() + ") has " + std::to_string(cluster.num_gpus()) +
                     " (an inter-node calibration needs a cluster, and a log whose '#  Rank' lines name the hosts)");
  }
  std::set<int> seen;
  for (int g : gpus) {
    if (g < 0 || g >= cluster.num_gpus())
      throw InputError("GPU " + std::to_string(g) + " is outside '" + cluster.name + "' (" +
                       std::to_string(cluster.num_gpus()) + " GPUs)");
    if (!seen.insert(g).second) throw InputError("GPU " + std::to_string(g) + " is in the all-to-all twice");
  }
}

NetworkCalibration calibrate_network(const ClusterSpec& cluster, const std::vector<int>& gpus,
                                     const std::vector<AllToAllPoint>& points) {
  check_network_gpus(cluster, gpus);
  std::vector<int> group = gpus;
  std::sort(group.begin(), group.end());  // the graph's groups are sorted; the times do not depend on the order
  NetworkCalibration cal;
  cal.nodes = nodes_holding(cluster, group);
  cal.inter_node = cal.nodes > 1;
  cal.measured = fit_all_to_all(points, static_cast<int>(group.size()));
  if (cal.measured.latency_clamped)
    cal.notes.push_back("the fitted latency came out negative, so the line was fitted through 0 latency");
  if (cal.inter_node)
    calibrate_inter_node(cluster, group, points, cal);
  else
    calibrate_intra_node(cluster, group, points, cal);
  return cal;
}

namespace {

std::string link_yaml(const LinkSpec& l) {
  return "{bandwidth: " + yaml_fixed(l.bandwidth / 1e9, 4) + " GB/s, efficiency: " + yaml_fixed(l.efficiency, 4) +
         ", latency: " + yaml_fixed(static_cast<double>(l.latency_ns) / 1e3, 3) + " us}";
}

}  // namespace

std::string network_calibration_yaml(const NetworkCalibration& cal, int ranks,
                                     const std::vector<AllToAllPoint>& points, const std::string& source) {
  std::ostringstream y;
  y << "# " << (cal.inter_node ? "Inter-node" : "Intra-node") << " network fitted to a measured all-to-all of " << ranks
    << " GPUs" << (cal.inter_node ? " on " + std::to_string(cal.nodes) + " nodes" : "") << ": t = "
    << yaml_fixed(cal.measured.latency_ns / 1e3, 3) << " us + (ranks - 1) x bytes per peer / "
    << yaml_fixed(cal.measured.bandwidth / 1e9, 3) << " GB/s (docs/calibration.md).\n"
    << "# Calibrated models against the measurement, worst point: alpha-beta "
    << yaml_fixed(100 * cal.alpha_beta_max_error, 1) << "%";
  if (!cal.link_types.empty() || cal.nic_port) y << ", flow " << yaml_fixed(100 * cal.flow_max_error, 1) << "%";
  y << ".\n";
  for (const std::string& note : cal.notes) y << "# note: " << note << "\n";
  if (cal.intra_node) y << "intra_node: " << link_yaml(*cal.intra_node) << "\n";
  if (!cal.link_types.empty()) {
    y << "link_types:\n";
    for (const auto& [type, link] : cal.link_types) y << "  " << type << ": " << link_yaml(link) << "\n";
  }
  if (cal.inter_node_link) y << "inter_node: " << link_yaml(*cal.inter_node_link) << "\n";
  if (cal.nic_port) y << "nic_port: " << link_yaml(*cal.nic_port) << "\n";
  y << (cal.inter_node ? "inter_node_all_to_all" : "all_to_all") << ":\n  ranks: " << ranks << "\n";
  if (cal.inter_node) y << "  nodes: " << cal.nodes << "\n";
  y << "  source: " << yaml_quoted(source) << "\n  bytes_per_peer: [";
  for (std::size_t i = 0; i < points.size(); ++i) y << (i ? ", " : "") << points[i].bytes_per_peer;
  y << "]\n  time_us: [";
  for (std::size_t i = 0; i < points.size(); ++i) y << (i ? ", " : "") << yaml_fixed(points[i].time_ns / 1e3, 3);
  y << "]\n";
  return y.str();
}

}  // namespace moesim
