// Fitting NCCL's all-reduce terms to a measured all-reduce (sim/driver/all_reduce_calibration.h):
// times the model itself gives with other hop latencies and efficiencies are traced back to them
// within 0.1%, within a node and across nodes, on the flow and the alpha-beta model; what the
// terms cannot reach is said; and the YAML written loads back to the fitted terms.
#include "sim/driver/all_reduce_calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/driver/logged_gpus.h"
#include "sim/driver/nccl_tests_replay.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

// `tuning`'s row `hop` x h and every efficiency x e: what a cluster would measure if NCCL's terms
// were these.
NcclTuning truth_terms(NcclTuning tuning, NcclHop hop, double h, double e) {
  for (auto& row : tuning.hop_latency[static_cast<std::size_t>(hop)])
    for (TimeNs& lat : row) lat = static_cast<TimeNs>(std::llround(static_cast<double>(lat) * h));
  for (auto& row : tuning.efficiency)
    for (double& x : row) x *= e;
  return tuning;
}

// The all-reduce times of `model` on `cluster` for nccl-tests sizes 8 B to 1 GiB (x4), rounded to
// 0.01 us as nccl-tests prints them.
std::vector<AllReducePoint> logged_times(const ClusterSpec& cluster, const std::vector<int>& group, NetworkModel model) {
  const TaskGraph graph(cluster.num_gpus(), group);
  const auto net = make_collective_model(graph, cluster, NetworkChoice{model, AllToAllAlgorithm::kPairwise});
  std::vector<AllReducePoint> points;
  for (std::int64_t s = 8; s <= (std::int64_t{1} << 30); s *= 4) {
    const auto t = static_cast<double>(simulate_nccl_tests_row(*net, CollectiveOp::kAllReduce, s, group));
    points.push_back(AllReducePoint{s, std::round(t / 10) * 10});
  }
  return points;
}

struct Case {
  std::string hardware;
  NetworkModel model;  // alpha-beta: the hardware's topology (and fabric) taken away, so auto picks it
  double hop_factor, efficiency_factor;
};

TEST(AllReduceCalibration, TheModelsOwnTimesGiveBackItsTerms) {
  const Case cases[] = {
      {"hardware/nodes/hgx-h100.yaml", NetworkModel::kFlow, 1.5, 0.8},
      {"hardware/nodes/dgx-a100.yaml", NetworkModel::kFlow, 0.7, 0.6},
      {"hardware/nodes/v100-4gpu-nvlink.yaml", NetworkModel::kAlphaBeta, 2.0, 0.9},
      {"hardware/clusters/dgx-a100-2node.yaml", NetworkModel::kFlow, 3.0, 0.75},
      {"hardware/clusters/h100-4x-hgx-ndr.yaml", NetworkModel::kAlphaBeta, 1.25, 0.5},
  };
  for (const Case& c : cases) {
    ClusterSpec cluster = load_hardware_spec(kRoot + "/" + c.hardware);
    if (c.model == NetworkModel::kAlphaBeta) cluster.node.topology.present = cluster.fabric.present = false;
    const std::vector<int> gpus = first_gpus(cluster.num_gpus());
    const NcclHop hop = cluster.num_nodes > 1 ? NcclHop::kNet : cluster.node.nccl.intra_hop;
    ClusterSpec truth = cluster;
    truth.node.nccl = truth_terms(cluster.node.nccl, hop, c.hop_factor, c.efficiency_factor);
    const std::vector<AllReducePoint> points = logged_times(truth, gpus, c.model);
    const AllReduceCalibration cal = calibrate_all_reduce(cluster, gpus, points);
    EXPECT_EQ(cal.model, c.model) << c.hardware;
    EXPECT_EQ(cal.hop, hop) << c.hardware;
    EXPECT_NEAR(cal.hop_factor.value, c.hop_factor, 1e-3 * c.hop_factor) << c.hardware;
    EXPECT_NEAR(cal.efficiency_factor.value, c.efficiency_factor, 1e-3 * c.efficiency_factor) << c.hardware;
    EXPECT_LT(cal.fit.rms_relative_residual, 1e-3) << c.hardware;
    EXPECT_LT(cal.hop_factor.standard_error, 1e-3) << c.hardware;
    EXPECT_FALSE(cal.hop_factor.at_bound || cal.efficiency_factor.at_bound) << c.hardware;
    EXPECT_TRUE(cal.notes.empty()) << c.hardware << ": " << cal.notes.front();
    // Only the row of the hop the log crossed moved; the base latencies stayed.
    for (int h = 0; h < kNumNcclHops; ++h) {
      const auto row = static_cast<std::size_t>(h);
      if (h != static_cast<int>(hop)) {
        EXPECT_EQ(cal.tuning.hop_latency[row], cluster.node.nccl.hop_latency[row]);
      }
    }
    EXPECT_EQ(cal.tuning.base_latency, cluster.node.nccl.base_latency);
    EXPECT_EQ(cal.runs.size(), points.size());
  }
}

TEST(AllReduceCalibration, AnAllReduceFasterThanTheLinksStopsAtFullEfficiency) {
  // Times at twice the links' rate (an NVLS all-reduce, say): the efficiencies stop at 1, and
  // the note says why the model stays slower.
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/nodes/hgx-h100.yaml");
  const std::vector<int> gpus = first_gpus(8);
  std::vector<AllReducePoint> points = logged_times(cluster, gpus, NetworkModel::kFlow);
  for (AllReducePoint& p : points) p.time_ns = 15e3 + (p.time_ns - 15e3) / 2;
  const AllReduceCalibration cal = calibrate_all_reduce(cluster, gpus, points);
  EXPECT_TRUE(cal.efficiency_factor.at_bound);
  EXPECT_DOUBLE_EQ(cal.efficiency_factor.value, 1.0);
  EXPECT_EQ(cal.efficiency_factor.standard_error, 0.0);
  ASSERT_FALSE(cal.notes.empty());
  EXPECT_NE(cal.notes.back().find("faster than the links allow at full efficiency"), std::string::npos) << cal.notes.back();
  EXPECT_GT(cal.fit.rms_relative_residual, 0.05);
}

TEST(AllReduceCalibration, TooLittleToFitIsRefused) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/nodes/hgx-h100.yaml");
  EXPECT_THROW(calibrate_all_reduce(cluster, first_gpus(8), {{1024, 20e3}, {1 << 20, 40e3}}), InputError);
  EXPECT_THROW(calibrate_all_reduce(cluster, first_gpus(1), {{8, 1e4}, {64, 1e4}, {512, 1e4}}), InputError);
  EXPECT_THROW(calibrate_all_reduce(cluster, first_gpus(8), {{8, 1e4}, {64, 0}, {512, 1e4}}), InputError);
}

TEST(AllReduceCalibration, TheWrittenTermsLoadBackAndApply) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  const std::vector<int> gpus = first_gpus(16);
  ClusterSpec truth = cluster;
  truth.node.nccl = truth_terms(cluster.node.nccl, NcclHop::kNet, 2.0, 0.9);
  const std::vector<AllReducePoint> points = logged_times(truth, gpus, NetworkModel::kFlow);
  const AllReduceCalibration cal = calibrate_all_reduce(cluster, gpus, points);
  const std::string yaml = "schema_version: 1\nkind: calibration\nname: t\ngpu: " + cluster.node.gpu.name + "\n" +
                           all_reduce_calibration_yaml(cal, 16, points, "test");
  const CalibrationSpec spec = parse_calibration(yaml, "t.yaml");
  ASSERT_TRUE(spec.nccl && spec.all_reduce);
  EXPECT_EQ(spec.all_reduce->ranks, 16);
  EXPECT_EQ(spec.all_reduce->nodes, 2);
  EXPECT_EQ(spec.all_reduce->bytes.size(), points.size());
  EXPECT_FALSE(spec.nccl->hop_latency[0] || spec.nccl->hop_latency[1]);  // nvlink and pcie stay
  ClusterSpec applied = cluster;
  apply_calibration(applied, spec);
  EXPECT_EQ(applied.node.nccl.hop_latency, cal.tuning.hop_latency);
  for (std::size_t a = 0; a < 2; ++a)
    for (std::size_t q = 0; q < 3; ++q)
      EXPECT_NEAR(applied.node.nccl.efficiency[a][q], cal.tuning.efficiency[a][q], 1e-6);
  // A table with an entry missing is refused: a fitted table replaces the node's whole.
  const std::string partial = "schema_version: 1\nkind: calibration\nname: t\ngpu: x\nnccl:\n  efficiency:\n"
                              "    ring: {ll: 0.2, ll128: 0.7}\n    tree: {ll: 0.2, ll128: 0.7, simple: 0.9}\n";
  EXPECT_THROW(parse_calibration(partial, "p.yaml"), InputError);
}

}  // namespace
}  // namespace moesim
