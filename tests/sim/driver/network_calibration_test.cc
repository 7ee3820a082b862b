// Fitting a node's intra-node network to a measured all-to-all (sim/driver/network_calibration.h):
// the fit recovers a line exactly, and after calibration both network models reproduce the
// measurement on a switched node; the YAML it writes loads back to the same values.
#include "sim/driver/network_calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <fstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

std::vector<AllToAllPoint> line_points(int ranks, double latency_ns, double bandwidth) {
  std::vector<AllToAllPoint> points;
  for (std::int64_t b = 128; b <= (std::int64_t{1} << 27); b *= 4)
    points.push_back(AllToAllPoint{b, latency_ns + static_cast<double>(ranks - 1) * static_cast<double>(b) / bandwidth * 1e9});
  return points;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(NetworkCalibration, TheFitRecoversALine) {
  const AllToAllLine line = fit_all_to_all(line_points(8, 25e3, 350e9), 8);
  EXPECT_NEAR(line.latency_ns, 25e3, 1e-3);
  EXPECT_NEAR(line.bandwidth, 350e9, 350e9 * 1e-9);
  EXPECT_FALSE(line.latency_clamped);
  // Relative weights: 10% noise on the largest message moves the latency a little, not by its size.
  std::vector<AllToAllPoint> noisy = line_points(8, 25e3, 350e9);
  noisy.back().time_ns *= 1.1;
  EXPECT_NEAR(fit_all_to_all(noisy, 8).latency_ns, 25e3, 2.5e3);
  // A negative intercept is refitted through 0 and said so.
  const AllToAllLine clamped = fit_all_to_all({{1000, 1000}, {2000, 3000}}, 2);
  EXPECT_TRUE(clamped.latency_clamped);
  EXPECT_EQ(clamped.latency_ns, 0);
  EXPECT_GT(clamped.bandwidth, 0);
}

// Each fitted parameter comes with its standard error and the line with its residuals: zero on
// an exact line, and on a scattered one the residuals the line leaves and errors that shrink as
// the scatter does.
TEST(NetworkCalibration, TheFitReportsItsResiduals) {
  const AllToAllLine exact = fit_all_to_all(line_points(8, 25e3, 350e9), 8);
  EXPECT_NEAR(exact.rms_relative_residual, 0, 1e-12);
  EXPECT_NEAR(exact.latency_stderr_ns, 0, 1e-6);
  EXPECT_NEAR(exact.bandwidth_stderr, 0, 1e-3);
  const auto scattered = [](double amplitude) {
    std::vector<AllToAllPoint> p = line_points(8, 25e3, 350e9);
    for (std::size_t i = 0; i < p.size(); ++i) p[i].time_ns *= 1 + (i % 2 == 0 ? amplitude : -amplitude);
    return p;
  };
  const std::vector<AllToAllPoint> points = scattered(0.04);
  const AllToAllLine line = fit_all_to_all(points, 8);
  double sum_sq = 0, worst = 0;
  for (const AllToAllPoint& p : points) {
    const double fitted = line.latency_ns + 7.0 * static_cast<double>(p.bytes_per_peer) / line.bandwidth * 1e9;
    const double r = (fitted - p.time_ns) / p.time_ns;
    sum_sq += r * r;
    if (std::abs(r) > std::abs(worst)) worst = r;
  }
  EXPECT_NEAR(line.rms_relative_residual, std::sqrt(sum_sq / static_cast<double>(points.size())), 1e-9);
  EXPECT_NEAR(line.worst_relative_residual, worst, 1e-9);
  EXPECT_GT(line.rms_relative_residual, 0.02);  // a +-4% scatter cannot be fitted away
  EXPECT_GT(line.latency_stderr_ns, 0);
  EXPECT_GT(line.bandwidth_stderr, 0);
  const AllToAllLine tighter = fit_all_to_all(scattered(0.01), 8);
  EXPECT_LT(tighter.latency_stderr_ns, line.latency_stderr_ns);
  EXPECT_LT(tighter.bandwidth_stderr, line.bandwidth_stderr);
  // Two points: a line passes through both, nothing is left to estimate an error from.
  const AllToAllLine two = fit_all_to_all({{1024, 30e3}, {4096, 40e3}}, 8);
  EXPECT_NEAR(two.rms_relative_residual, 0, 1e-12);
  EXPECT_EQ(two.latency_stderr_ns, 0);
}

TEST(NetworkCalibration, TheFitRefusesWhatNoLineDescribes) {
  EXPECT_NE(error_of([] { fit_all_to_all({{1024, 10}, {1024, 11}}, 8); }).find("at least two message sizes"),
            std::string::npos);
  EXPECT_NE(error_of([] { fit_all_to_all(line_points(2, 1, 1e9), 1); }).find("at least 2 ranks"), std::string::npos);
  EXPECT_NE(error_of([] { fit_all_to_all({{1024, 20}, {4096, 10}}, 8); }).find("do not grow with the message size"),
            std::string::npos);
  EXPECT_NE(error_of([] { fit_all_to_all({{1024, 0}, {4096, 10}}, 8); }).find("positive bytes and time"),
            std::string::npos);
  // A slope that is only rounding: flat.
  EXPECT_NE(error_of([] { fit_all_to_all({{1024, 10000}, {4096, 10000.0001}}, 8); }).find("do not grow"),
            std::string::npos);
}

TEST(NetworkCalibration, BothModelsReproduceTheMeasurementOnASwitchedNode) {
  for (const char* node : {"hgx-h100.yaml", "dgx-a100.yaml"}) {
    const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/nodes/" + node);
    for (int ranks : {8, 4}) {
      const std::vector<AllToAllPoint> points = line_points(ranks, 31e3, 190e9);
      const NetworkCalibration cal = calibrate_network(cluster, first_gpus(ranks), points);
      EXPECT_NEAR(cal.measured.latency_ns, 31e3, 1e-3) << node;
      EXPECT_LT(cal.alpha_beta_max_error, 1e-3) << node << " " << ranks;
      EXPECT_LT(cal.flow_max_error, 1e-3) << node << " " << ranks;
      EXPECT_DOUBLE_EQ(cal.intra_node->efficiency, 1.0);
      EXPECT_NEAR(cal.intra_node->bandwidth, 190e9, 190e9 * 1e-3) << node;
      // Only the NVLink type changes; PCIe and the CPU link keep their values.
      ASSERT_EQ(cal.link_types.size(), 1u) << node;
      EXPECT_NE(cal.link_types.begin()->first.find("nvlink"), std::string::npos);
    }
  }
}

TEST(NetworkCalibration, UnevenNodesScaleEveryLinkTypeOnTheGpuRoutes) {
  // DGX-1: some GPU pairs have two NVLinks, some one, some none (PCIe through the CPUs). Every link
  // type on a route between the GPUs is scaled, so the flow model reproduces the measurement too;
  // a type that also carries the GPUs' traffic to their NICs is named in the notes.
  const ClusterSpec dgx1 = load_hardware_spec(kRoot + "/hardware/nodes/dgx-1-v100.yaml");
  const NetworkCalibration cal = calibrate_network(dgx1, first_gpus(8), line_points(8, 20e3, 80e9));
  EXPECT_LT(cal.alpha_beta_max_error, 1e-3);
  EXPECT_LT(cal.flow_max_error, 1e-3);
  EXPECT_GT(cal.link_types.size(), 1u);
  bool nic_note = false;
  for (const std::string& n : cal.notes) nic_note = nic_note || n.find("also joins the GPUs to their NICs") != std::string::npos;
  EXPECT_TRUE(nic_note);
}

// A network model's all-to-all times among `group` on `cluster` for the sizes of `points`.
std::vector<AllToAllPoint> model_times(const ClusterSpec& cluster, const std::vector<int>& group,
                                       const std::vector<AllToAllPoint>& points, NetworkModel model = NetworkModel::kFlow) {
  const TaskGraph graph(cluster.num_gpus(), group);
  const auto net = make_collective_model(graph, cluster, NetworkChoice{model, AllToAllAlgorithm::kPairwise});
  std::vector<AllToAllPoint> out;
  for (const AllToAllPoint& p : points)
    out.push_back({p.bytes_per_peer, static_cast<double>(net->isolated_duration(
                                         CollectiveWork{CollectiveOp::kAllToAll, 0, p.bytes_per_peer}, group))});
  return out;
}

TEST(NetworkCalibration, RoutesOfDifferentLatencyAreSettledByRepeatedCorrections) {
  // A PCIe node whose CPU-to-CPU link is slow to start and fast: pairs across the sockets start
  // 40 us late, so one factor on every link does not move the flow model's line exactly, and its
  // times are no straight line either. Repeated corrections still make its fitted line the measured
  // one; the residual of the points is reported, not hidden.
  ClusterSpec node = load_hardware_spec(kRoot + "/hardware/nodes/pcie-8gpu-a100.yaml");
  LinkSpec& upi = node.node.topology.link_types.at("upi");
  upi.bandwidth = 400e9;
  upi.latency_ns = 40000;
  for (double bandwidth : {20e9, 60e9}) {
    const std::vector<AllToAllPoint> points = line_points(8, 30e3, bandwidth);
    const NetworkCalibration cal = calibrate_network(node, first_gpus(8), points);
    EXPECT_LT(cal.alpha_beta_max_error, 1e-3);
    ClusterSpec calibrated = node;
    for (const auto& [type, link] : cal.link_types) calibrated.node.topology.link_types[type] = link;
    const AllToAllLine line = fit_all_to_all(model_times(calibrated, first_gpus(8), points), 8);
    EXPECT_NEAR(line.bandwidth, bandwidth, 1e-3 * bandwidth);
    EXPECT_NEAR(line.latency_ns, 30e3, 30.0);
    EXPECT_GT(cal.flow_max_error, 0.0);
    EXPECT_LT(cal.flow_max_error, 0.5);
    std::cout << "uneven latencies, " << bandwidth / 1e9 << " GB/s: flow points within " << 100 * cal.flow_max_error
              << "% of the measured line\n";
  }
}

TEST(NetworkCalibration, AnAllToAllAcrossNodesCalibratesTheInterNodeLinks) {
  // Two DGX A100s: the alpha-beta model's per-GPU inter_node link and the flow model's NIC ports
  // move; the intra-node links keep their values. With every GPU or half of each node.
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  const std::vector<std::vector<int>> groups = {first_gpus(16), {0, 1, 2, 3, 8, 9, 10, 11}};
  for (const std::vector<int>& gpus : groups) {
    const int ranks = static_cast<int>(gpus.size());
    // 150 us: above what NCCL's rounds of peers cost at least (8.4 us + 15 rounds x 3 us on 16 GPUs).
    const std::vector<AllToAllPoint> points = line_points(ranks, 150e3, 12e9);
    const NetworkCalibration cal = calibrate_network(cluster, gpus, points);
    EXPECT_TRUE(cal.inter_node);
    EXPECT_EQ(cal.nodes, 2);
    EXPECT_FALSE(cal.intra_node.has_value());
    EXPECT_TRUE(cal.link_types.empty());
    ASSERT_TRUE(cal.inter_node_link && cal.nic_port);
    // t = L + inter peers x b / inter bandwidth when the NICs set the time: inter peers = ranks / 2.
    EXPECT_NEAR(cal.inter_node_link->effective_bandwidth(), 12e9 * (ranks / 2) / (ranks - 1), 12e6) << ranks;
    EXPECT_DOUBLE_EQ(cal.inter_node_link->efficiency, 1.0);
    // Every one of the ranks - 1 rounds of peers has a pair across the nodes: each pays the link's
    // latency, after NCCL's base latency of 8.4 us.
    // (Model times are whole ns: over 7 rounds the fitted latency settles within a few ns.)
    EXPECT_NEAR(static_cast<double>(cal.inter_node_link->latency_ns), (150e3 - 8400) / (ranks - 1), 5.0) << ranks;
    EXPECT_LT(cal.alpha_beta_max_error, 1e-3) << ranks;
    EXPECT_LT(cal.flow_max_error, 2e-4) << ranks;
    EXPECT_DOUBLE_EQ(cal.nic_port->efficiency, cluster.node.topology.nic_port.efficiency);  // its line rate moves
    std::cout << ranks << " GPUs on 2 nodes: NIC port " << cal.nic_port->effective_bandwidth() * 8 / 1e9
              << " Gb/s, flow points within " << 100 * cal.flow_max_error << "%\n";
  }
}

TEST(NetworkCalibration, TheFlowModelsOwnTimesGiveBackItsNicPorts) {
  // Times the flow model gives with slower, later NIC ports are a measurement the calibration
  // must trace back to those ports.
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  ClusterSpec truth = cluster;
  truth.node.topology.nic_port.bandwidth = 150e9 / 8;
  truth.node.topology.nic_port.latency_ns = 7500;
  const std::vector<int> gpus = first_gpus(16);
  const std::vector<AllToAllPoint> points = model_times(truth, gpus, line_points(16, 1, 1e9));
  const NetworkCalibration cal = calibrate_network(cluster, gpus, points);
  ASSERT_TRUE(cal.nic_port.has_value());
  EXPECT_NEAR(cal.nic_port->bandwidth, truth.node.topology.nic_port.bandwidth, 1e-3 * truth.node.topology.nic_port.bandwidth);
  // A message across nodes takes the larger of the NIC port's and the cluster's inter-node latency
  // (which the alpha-beta model's calibration of the same log sets to 7500 ns): together 7500 ns.
  EXPECT_NEAR(static_cast<double>(std::max(cal.nic_port->latency_ns, cal.inter_node_link->latency_ns)), 7500.0, 50.0);
  EXPECT_LT(cal.flow_max_error, 1e-3);
}

TEST(NetworkCalibration, WhatTheInterNodeLinksCannotReachIsSaid) {
  // The GPUs reach their NICs over PCIe (25.6 GB/s here): NIC ports far faster than that do not
  // make the flow model faster, so a measurement at 100 GB/s per GPU's NIC share cannot be met. The
  // alpha-beta model has one inter_node link and meets it; the flow model's shortfall is a note,
  // and its NIC ports stop where the PCIe link caps them instead of growing without bound.
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  const double pcie = cluster.node.topology.link_types.at("pcie4").effective_bandwidth();
  for (double bandwidth : {50e9, 150e9}) {
    const NetworkCalibration cal = calibrate_network(cluster, first_gpus(16), line_points(16, 150e3, bandwidth));
    EXPECT_LT(cal.alpha_beta_max_error, 1e-3);
    EXPECT_GT(cal.flow_max_error, 0.03) << bandwidth;
    ASSERT_TRUE(cal.nic_port.has_value());
    EXPECT_LT(cal.nic_port->effective_bandwidth(), 1.1 * pcie) << bandwidth;  // not 50 or 150 GB/s
    EXPECT_GT(cal.nic_port->effective_bandwidth(), 0.99 * pcie) << bandwidth;
    bool said = false;
    for (const std::string& n : cal.notes)
      said = said || n.find("flow nic_port: moving these links cannot make the model's line the measured one (faster "
                            "links no longer speed the model up") != std::string::npos;
    EXPECT_TRUE(said) << bandwidth;
  }
  // A cluster without a fabric: only the alpha-beta model is calibrated, and a note says so.
  ClusterSpec no_fabric = cluster;
  no_fabric.fabric.present = false;
  const NetworkCalibration ab = calibrate_network(no_fabric, first_gpus(16), line_points(16, 40e3, 12e9));
  EXPECT_FALSE(ab.nic_port.has_value());
  ASSERT_FALSE(ab.notes.empty());
  EXPECT_NE(ab.notes.back().find("the flow model is not calibrated: cluster 'DGX-A100-2node' has no fabric section"),
            std::string::npos) << ab.notes.back();
}

TEST(NetworkCalibration, AnUnreachableLatencyDoesNotBendTheBandwidth) {
  // The intra-node links start 20 us late, the measured all-to-all across nodes 5 us: the inter-node
  // latency goes to 0 and no further, and the bandwidth still is the measured one where it sets
  // the time, at the large sizes.
  ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  cluster.node.intra_node.latency_ns = 20000;
  const NetworkCalibration cal = calibrate_network(cluster, first_gpus(16), line_points(16, 5e3, 12e9));
  ASSERT_TRUE(cal.inter_node_link.has_value());
  EXPECT_EQ(cal.inter_node_link->latency_ns, 0);
  EXPECT_NEAR(cal.inter_node_link->effective_bandwidth(), 12e9 * 8 / 15, 1e-3 * 12e9 * 8 / 15);
  bool said = false;
  for (const std::string& n : cal.notes)
    said = said || n.find("alpha-beta inter_node: moving this link cannot make the model's line the measured one "
                          "(its latencies are cut to 0); at its worst, 128 bytes per peer, the model is") !=
                       std::string::npos;
  EXPECT_TRUE(said);
}

TEST(NetworkCalibration, GpusThatHadTheirNicsToThemselvesAreSaid) {
  // Two GPUs to a NIC: a log of one GPU per node measured a NIC to itself, which the alpha-beta
  // model's per-GPU link cannot tell from a full node's share; a note says so.
  ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  cluster.node.topology.gpu_nic = {0, 0, 2, 2, 4, 4, 6, 6};  // both GPUs of a PCIe switch on its first NIC
  const auto shared_note = [](const NetworkCalibration& cal) {
    for (const std::string& n : cal.notes)
      if (n.find("the measured GPUs shared their NICs at most 1 to a NIC, and a full node's 2") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(shared_note(calibrate_network(cluster, {0, 8}, line_points(2, 10e3, 20e9))));
  EXPECT_FALSE(shared_note(calibrate_network(cluster, first_gpus(16), line_points(16, 10e3, 12e9))));
}

TEST(NetworkCalibration, TheGpusMustBeDistinctGpusOfTheCluster) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/nodes/hgx-h100.yaml");
  const auto points = line_points(16, 20e3, 100e9);
  EXPECT_NE(error_of([&] { calibrate_network(cluster, first_gpus(16), points); })
                .find("the all-to-all ran on 16 GPUs and 'HGX-H100' ("),
            std::string::npos);
  EXPECT_NE(error_of([&] { calibrate_network(cluster, first_gpus(1), points); }).find("at least 2 GPUs, got 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { calibrate_network(cluster, {0, 3, 3}, points); }).find("GPU 3 is in the all-to-all twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] { calibrate_network(cluster, {0, 8}, points); }).find("GPU 8 is outside 'HGX-H100' (8 GPUs)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { calibrate_network(load_hardware_spec(kRoot + "/hardware/gpus/h100-sxm5.yaml"), first_gpus(2), points); })
                .find("has one GPU: there is no network between GPUs to calibrate"),
            std::string::npos);
  const ClusterSpec loop = load_hardware_spec(kRoot + "/hardware/nodes/h100-loopback-8.yaml");
  EXPECT_NE(error_of([&] { calibrate_network(loop, first_gpus(8), points); }).find("is a loopback node"), std::string::npos);
}

// `cal`'s sections written as a calibration file of `cluster`'s GPU (temp `name`), loaded back.
CalibrationSpec written_and_loaded(const ClusterSpec& cluster, const NetworkCalibration& cal, int ranks,
                                   const std::vector<AllToAllPoint>& points, const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  {
    std::ofstream out(path);
    out << "schema_version: 1\nkind: calibration\nname: test\ngpu: " << cluster.node.gpu.name << "\n"
        << network_calibration_yaml(cal, ranks, points, "a test");
  }
  CalibrationSpec spec = load_calibration(path);
  std::filesystem::remove(path);
  return spec;
}

TEST(NetworkCalibration, TheWrittenSectionsLoadBackToTheSameValues) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/nodes/hgx-h100.yaml");
  const std::vector<AllToAllPoint> points = line_points(8, 24e3, 340e9);
  const NetworkCalibration cal = calibrate_network(cluster, first_gpus(8), points);
  const CalibrationSpec spec = written_and_loaded(cluster, cal, 8, points, "moesim_network_calibration_test.yaml");
  ASSERT_TRUE(spec.intra_node && spec.all_to_all);
  EXPECT_NEAR(spec.intra_node->effective_bandwidth(), cal.intra_node->effective_bandwidth(), 1e5);  // 4 decimals of GB/s
  EXPECT_EQ(spec.intra_node->latency_ns, cal.intra_node->latency_ns);
  EXPECT_EQ(spec.all_to_all->ranks, 8);
  EXPECT_EQ(spec.all_to_all->bytes_per_peer.size(), points.size());
  ASSERT_EQ(spec.link_types.size(), cal.link_types.size());
  for (const auto& [type, link] : cal.link_types) EXPECT_NEAR(spec.link_types.at(type).bandwidth, link.bandwidth, 1e5);
  ClusterSpec applied = cluster;
  apply_calibration(applied.node, spec);
  EXPECT_EQ(applied.node.intra_node.latency_ns, cal.intra_node->latency_ns);
}

TEST(NetworkCalibration, TheWrittenInterNodeSectionsLoadBackToTheSameValues) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  const std::vector<AllToAllPoint> points = line_points(16, 135e3, 14e9);
  const NetworkCalibration cal = calibrate_network(cluster, first_gpus(16), points);
  const CalibrationSpec spec = written_and_loaded(cluster, cal, 16, points, "moesim_inter_node_calibration_test.yaml");
  ASSERT_TRUE(spec.inter_node && spec.nic_port && spec.inter_node_all_to_all);
  EXPECT_FALSE(spec.calibrates_intra_node());
  EXPECT_EQ(spec.inter_node_all_to_all->nodes, 2);
  EXPECT_EQ(spec.inter_node_all_to_all->ranks, 16);
  ClusterSpec applied = cluster;
  apply_calibration(applied, spec);
  EXPECT_NEAR(applied.inter_node.effective_bandwidth(), cal.inter_node_link->effective_bandwidth(), 1e5);
  EXPECT_EQ(applied.inter_node.latency_ns, cal.inter_node_link->latency_ns);
  EXPECT_NEAR(applied.node.topology.nic_port.bandwidth, cal.nic_port->bandwidth, 1e5);
  // The calibrated cluster reproduces the measurement in both models.
  for (NetworkModel model : {NetworkModel::kAlphaBeta, NetworkModel::kFlow}) {
    const auto times = model_times(applied, first_gpus(16), points, model);
    for (std::size_t i = 0; i < points.size(); ++i)
      EXPECT_NEAR(times[i].time_ns, points[i].time_ns, 0.02 * points[i].time_ns) << i;
  }
}

}  // namespace
}  // namespace moesim
