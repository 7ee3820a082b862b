// Calibration files (kind: calibration): what they replace in a node, how they attach (a node
// file's `calibration:` key or --calibration), and the rules of the reference's robustness table:
// a GPU-model mismatch, an empty or non-monotone size range, a table that does not fill its grid.
#include <gtest/gtest.h>

#include <string>

#include "sim/spec/loader.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using testing::calibration_error;
using testing::input_error_of;
using testing::replaced;
using testing::TempFiles;

const std::string kRoot = MOESIM_SOURCE_DIR;

const std::string kCalibration =
    "schema_version: 1\n"
    "kind: calibration\n"
    "name: a100 test calibration\n"
    "source: \"moesim calibrate (test)\"\n"
    "gpu: A100-SXM4-40GB\n"
    "device: \"NVIDIA A100-SXM4-40GB\"\n"
    "kernel_launch_overhead: 2.5 us\n"
    "hbm_bandwidth: 2600 GB/s\n"
    "pcie: {h2d_bandwidth: 24 GB/s, d2h_bandwidth: 22 GB/s, h2d_latency: 8 us, d2h_latency: 9 us}\n"
    "gemm:\n"
    "  bf16:\n"
    "    m: [128, 1024]\n"
    "    n: [256, 2048]\n"
    "    k: [512]\n"
    "    time_us:\n"
    "      - [10.5]    # m=128 n=256\n"
    "      - [20.25]   # m=128 n=2048\n"
    "      - [30]      # m=1024 n=256\n"
    "      - [150.125] # m=1024 n=2048\n";

std::string node_with_calibration(const std::string& ref) {
  return "schema_version: 1\nkind: node\nname: n\ngpu: " + kRoot +
         "/hardware/gpus/a100-sxm4-40gb.yaml\ngpus_per_node: 1\n"
         "pcie: {h2d_bandwidth: 25 GB/s, d2h_bandwidth: 25 GB/s, latency: 10 us}\n"
         "calibration: " + ref + "\n";
}

TEST(CalibrationLoader, ReadsEveryMeasurement) {
  TempFiles t;
  const CalibrationSpec c = load_calibration(t.write("cal.yaml", kCalibration));
  EXPECT_EQ(c.gpu, "A100-SXM4-40GB");
  EXPECT_EQ(c.device, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(c.kernel_launch_ns, 2500);
  EXPECT_DOUBLE_EQ(*c.hbm_bandwidth, 2600e9);
  EXPECT_DOUBLE_EQ(c.pcie_h2d->bandwidth, 24e9);
  EXPECT_EQ(c.pcie_d2h->latency_ns, 9000);
  ASSERT_EQ(c.gemm.count(DType::kBf16), 1u);
  const GemmTimeTable& g = c.gemm.at(DType::kBf16);
  EXPECT_EQ(g.m, (std::vector<std::int64_t>{128, 1024}));
  EXPECT_EQ(g.k, (std::vector<std::int64_t>{512}));
  // Rows are m-major: row (m=1024, n=256) holds 30 us.
  EXPECT_DOUBLE_EQ(g.time_ns[g.index(1, 0, 0)], 30000);
  EXPECT_DOUBLE_EQ(g.time_ns[g.index(1, 1, 0)], 150125);
}

TEST(CalibrationLoader, NodeKeyReplacesTheMeasuredValues) {
  TempFiles t;
  t.write("cal/a100.yaml", kCalibration);
  const ClusterSpec c = load_hardware_spec(t.write("node.yaml", node_with_calibration("cal/a100.yaml")));
  const NodeSpec& n = c.node;
  EXPECT_EQ(n.gpu.kernel_launch_ns, 2500);
  EXPECT_DOUBLE_EQ(n.gpu.hbm_bandwidth, 2600e9);
  EXPECT_DOUBLE_EQ(n.gpu.hbm_efficiency, 1.0);  // measured, so nothing to discount
  EXPECT_DOUBLE_EQ(n.pcie_h2d.effective_bandwidth(), 24e9);
  EXPECT_DOUBLE_EQ(n.pcie_d2h.effective_bandwidth(), 22e9);
  EXPECT_EQ(n.pcie_h2d.latency_ns, 8000);
  ASSERT_TRUE(n.gpu.calibration.has_value());
  EXPECT_NE(n.gpu.calibration->file.find("a100.yaml"), std::string::npos);
  EXPECT_EQ(n.gpu.calibration->gemm.size(), 1u);
  EXPECT_EQ(n.gpu.peak_flops.at(DType::kBf16), 312e12);  // the datasheet stays for other uses
}

// Measured interference cells replace the node's (here its own table, not the default); the
// cells the file does not give keep the node's values. A factor outside (0, 1] names its line.
TEST(CalibrationLoader, InterferenceCellsReplaceOnlyWhatWasMeasured) {
  TempFiles t;
  const std::string cal = t.write(
      "cal.yaml", kCalibration + "interference:\n  computation: {with_memcpy: 0.93}\n  memcpy: {with_memcpy: 0.61}\n");
  const std::string node = t.write(
      "node.yaml", replaced(node_with_calibration("cal.yaml"), "calibration: cal.yaml",
                            "interference: {computation: {with_memcpy: 0.5, with_all: 0.55}}\ncalibration: cal.yaml"));
  const InterferenceTable& f = load_hardware_spec(node).node.interference;
  EXPECT_DOUBLE_EQ(f.factors[1][2], 0.93);  // measured
  EXPECT_DOUBLE_EQ(f.factors[2][2], 0.61);  // measured
  EXPECT_DOUBLE_EQ(f.factors[1][3], 0.55);  // the node's own
  EXPECT_DOUBLE_EQ(f.factors[0][1], InterferenceTable{}.factors[0][1]);  // the default
  const std::string bad = t.write("bad.yaml", kCalibration + "interference:\n  memcpy: {with_computation: 1.5}\n");
  const std::string msg = input_error_of([&] { load_calibration(bad); });
  EXPECT_NE(msg.find("bad.yaml:21:30"), std::string::npos) << msg;
}

TEST(CalibrationLoader, CommandLineCalibrationOnAnyPreset) {
  TempFiles t;
  const std::string cal = t.write("cal.yaml", kCalibration);
  const ClusterSpec c = load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml", cal);
  ASSERT_TRUE(c.node.gpu.calibration.has_value());
  EXPECT_EQ(c.node.gpu.kernel_launch_ns, 2500);
  EXPECT_FALSE(load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml", "").node.gpu.calibration);
  // Only one calibration per node: a calibrated node file plus --calibration is ambiguous.
  t.write("cal/a100.yaml", kCalibration);
  const std::string node = t.write("node.yaml", node_with_calibration("cal/a100.yaml"));
  const std::string msg = input_error_of([&] { load_hardware_spec(node, cal); });
  EXPECT_NE(msg.find("already has a calibration"), std::string::npos) << msg;
}

TEST(CalibrationLoader, AnotherGpusCalibrationIsRejected) {
  TempFiles t;
  const std::string cal = t.write("cal.yaml", kCalibration);
  const std::string msg =
      input_error_of([&] { load_hardware_spec(kRoot + "/hardware/clusters/valor-4x-v100.yaml", cal); });
  EXPECT_NE(msg.find("cal.yaml:5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("measured on 'A100-SXM4-40GB' and cannot be applied to 'V100-SXM2-16GB'"), std::string::npos)
      << msg;
}

TEST(CalibrationLoader, ATableForADtypeTheGpuLacksIsRejected) {
  TempFiles t;
  const std::string cal = t.write("cal.yaml", replaced(replaced(kCalibration, "A100-SXM4-40GB\n", "V100-SXM2-16GB\n"),
                                                       "  bf16:", "  tf32:"));
  const std::string msg =
      input_error_of([&] { load_hardware_spec(kRoot + "/hardware/clusters/valor-4x-v100.yaml", cal); });
  EXPECT_NE(msg.find("gemm.tf32: GPU 'V100-SXM2-16GB' has no peak_flops for tf32"), std::string::npos) << msg;
}

TEST(CalibrationLoader, StrictRules) {
  TempFiles t;
  std::string msg = calibration_error(t, replaced(kCalibration, "m: [128, 1024]", "m: [1024, 128]"));
  EXPECT_NE(msg.find("bad.yaml:12:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("strictly increasing; 128 follows 1024"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "m: [128, 1024]", "m: [128, 128]"));
  EXPECT_NE(msg.find("strictly increasing"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "k: [512]", "k: []"));
  EXPECT_NE(msg.find("the k axis is empty"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "      - [150.125] # m=1024 n=2048\n", ""));
  EXPECT_NE(msg.find("has 3 rows; it needs one per (m, n) pair, m-major: 2 x 2 = 4"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "[30]", "[30, 31]"));
  EXPECT_NE(msg.find("has 2 times; it needs one per k (1)"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "[30]", "[0]"));
  EXPECT_NE(msg.find("time_us"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "[30]", "[-3]"));
  EXPECT_NE(msg.find("time_us"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "schema_version: 1", "schema_version: 3"));
  EXPECT_NE(msg.find("unsupported schema_version 3; supported schema_version: 1 to 2"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "kind: calibration", "kind: gpu"));
  EXPECT_NE(msg.find("bad.yaml:2:7: kind: this is a gpu file (kind: gpu), which goes to --hardware; --calibration "
                     "takes a calibration file"),
            std::string::npos)
      << msg;
  msg = calibration_error(t, replaced(kCalibration, "hbm_bandwidth:", "hbm_bandwith:"));
  EXPECT_NE(msg.find("did you mean 'hbm_bandwidth'"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "2600 GB/s", "2600 MB/s"));
  EXPECT_NE(msg.find("hbm_bandwidth"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "gpu: A100-SXM4-40GB\n", ""));
  EXPECT_NE(msg.find("missing required key 'gpu'"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "name: a100 test calibration\n", ""));
  EXPECT_NE(msg.find("missing required key 'name'"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kCalibration, "  bf16:", "  int8:"));
  EXPECT_NE(msg.find("unknown key 'int8'"), std::string::npos) << msg;
}

TEST(CalibrationLoader, ReferencedFileMustExistAndBeACalibration) {
  TempFiles t;
  // Given where a hardware file belongs, it says where it goes instead.
  std::string given_as_hardware = input_error_of([&] { load_hardware_spec(t.write("c.yaml", kCalibration)); });
  EXPECT_NE(given_as_hardware.find("this is a calibration file (kind: calibration), which goes to --calibration (or "
                                   "a node's calibration: key)"),
            std::string::npos)
      << given_as_hardware;
  std::string msg = input_error_of([&] { load_hardware_spec(t.write("node.yaml", node_with_calibration("nope.yaml"))); });
  EXPECT_NE(msg.find("cannot open referenced calibration file"), std::string::npos) << msg;
  t.write("gpu.yaml", "schema_version: 1\nkind: gpu\nname: g\n");
  msg = input_error_of([&] { load_hardware_spec(t.write("node.yaml", node_with_calibration("gpu.yaml"))); });
  EXPECT_NE(msg.find("gpu.yaml:2:7: kind: this is a gpu file (kind: gpu), which goes to --hardware; the calibration: "
                     "key of node.yaml takes a calibration file"),
            std::string::npos)
      << msg;
  // A GPU file cannot carry a calibration: it is measured on a node (PCIe is the node's).
  msg = input_error_of([&] {
    load_hardware_spec(t.write("g.yaml", "schema_version: 1\nkind: gpu\nname: g\ncalibration: cal.yaml\n"));
  });
  EXPECT_NE(msg.find("unknown key 'calibration'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moesim

namespace moesim {
namespace {

// The network sections (`moesim calibrate --alltoall-log`): the intra-node link and topology link
// types replace the node's, and a record of the measured all-to-all.
const std::string kNetworkCalibration =
    "schema_version: 1\n"
    "kind: calibration\n"
    "name: dgx-a100 network\n"
    "gpu: A100-SXM4-40GB\n"
    "intra_node: {bandwidth: 230 GB/s, efficiency: 1, latency: 21 us}\n"
    "link_types:\n"
    "  nvlink3: {bandwidth: 19 GB/s, efficiency: 0.8, latency: 20 us}\n"
    "all_to_all:\n"
    "  ranks: 8\n"
    "  source: \"test log\"\n"
    "  bytes_per_peer: [1024, 1048576]\n"
    "  time_us: [21.5, 60.25]\n";

TEST(CalibrationLoader, NetworkSectionsReplaceTheIntraNodeLinkAndTheLinkTypes) {
  TempFiles t;
  const std::string cal = t.write("net.yaml", kNetworkCalibration);
  const CalibrationSpec spec = load_calibration(cal);
  ASSERT_TRUE(spec.all_to_all.has_value());
  EXPECT_EQ(spec.all_to_all->ranks, 8);
  EXPECT_EQ(spec.all_to_all->source, "test log");
  EXPECT_EQ(spec.all_to_all->bytes_per_peer, (std::vector<std::int64_t>{1024, 1048576}));
  EXPECT_EQ(spec.all_to_all->time_ns, (std::vector<double>{21500, 60250}));
  const ClusterSpec plain = load_hardware_spec(kRoot + "/hardware/nodes/dgx-a100.yaml");
  const ClusterSpec c = load_hardware_spec(kRoot + "/hardware/nodes/dgx-a100.yaml", cal);
  EXPECT_DOUBLE_EQ(c.node.intra_node.effective_bandwidth(), 230e9);
  EXPECT_EQ(c.node.intra_node.latency_ns, 21000);
  const LinkSpec& nv = c.node.topology.link_types.at("nvlink3");
  EXPECT_DOUBLE_EQ(nv.bandwidth, 19e9);
  EXPECT_DOUBLE_EQ(nv.efficiency, 0.8);
  EXPECT_EQ(nv.latency_ns, 20000);
  // Everything else is the node's own.
  EXPECT_EQ(c.node.gpu.kernel_launch_ns, plain.node.gpu.kernel_launch_ns);
  EXPECT_EQ(c.node.topology.link_types.size(), plain.node.topology.link_types.size());
  for (const auto& [type, link] : plain.node.topology.link_types)
    if (type != "nvlink3") {
      EXPECT_DOUBLE_EQ(c.node.topology.link_types.at(type).bandwidth, link.bandwidth) << type;
    }
}

TEST(CalibrationLoader, NetworkSectionsMustFitTheNode) {
  TempFiles t;
  // A link type the topology does not have: named, with the ones it has.
  std::string cal = t.write("net.yaml", replaced(kNetworkCalibration, "  nvlink3:", "  nvlink9:"));
  std::string msg = input_error_of([&] { load_hardware_spec(kRoot + "/hardware/nodes/dgx-a100.yaml", cal); });
  EXPECT_NE(msg.find("net.yaml:7:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("link_types.nvlink9: node 'DGX-A100-40GB'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has no link type 'nvlink9'; it has "), std::string::npos) << msg;
  // A node without a topology has no link types to calibrate.
  cal = t.write("net.yaml", kNetworkCalibration);
  const std::string flat = t.write("flat.yaml", "schema_version: 1\nkind: node\nname: flat\ngpu: " + kRoot +
                                                    "/hardware/gpus/a100-sxm4-40gb.yaml\ngpus_per_node: 8\n"
                                                    "intra_node: {bandwidth: 300 GB/s, latency: 3 us}\n"
                                                    "pcie: {h2d_bandwidth: 25 GB/s, d2h_bandwidth: 25 GB/s, latency: 10 us}\n");
  msg = input_error_of([&] { load_hardware_spec(flat, cal); });
  EXPECT_NE(msg.find("link_types.nvlink3: node 'flat'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has no topology"), std::string::npos) << msg;
  // A one-GPU node has no intra-node link.
  msg = input_error_of([&] { load_hardware_spec(kRoot + "/hardware/gpus/a100-sxm4-40gb.yaml", t.write("n.yaml", kNetworkCalibration)); });
  EXPECT_NE(msg.find("has no link between GPUs to calibrate"), std::string::npos) << msg;
  // The record's lists must pair up; values are range-checked like a node's.
  msg = calibration_error(t, replaced(kNetworkCalibration, "[21.5, 60.25]", "[21.5]"));
  EXPECT_NE(msg.find("bad.yaml:12:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 1 times; it needs one per bytes_per_peer entry (2)"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kNetworkCalibration, "ranks: 8", "ranks: 1"));
  EXPECT_NE(msg.find("ranks"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kNetworkCalibration, "230 GB/s", "230 TB/s"));
  EXPECT_NE(msg.find("bandwidth"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kNetworkCalibration, "latency: 21 us", "latncy: 21 us"));
  EXPECT_NE(msg.find("did you mean 'latency'"), std::string::npos) << msg;
}

// The inter-node sections (`moesim calibrate --alltoall-log` on a log across nodes): the per-GPU
// inter_node link replaces the cluster's, nic_port the node's NIC ports.
const std::string kInterNodeCalibration =
    "schema_version: 1\n"
    "kind: calibration\n"
    "name: dgx-a100 2-node network\n"
    "gpu: A100-SXM4-40GB\n"
    "inter_node: {bandwidth: 21.5 GB/s, efficiency: 1, latency: 9 us}\n"
    "nic_port: {bandwidth: 190 Gb/s, efficiency: 0.94, latency: 8 us}\n"
    "inter_node_all_to_all:\n"
    "  ranks: 16\n"
    "  nodes: 2\n"
    "  source: \"test log\"\n"
    "  bytes_per_peer: [1024, 1048576]\n"
    "  time_us: [30.5, 390.25]\n";

TEST(CalibrationLoader, InterNodeSectionsReplaceTheClustersLinkAndTheNicPorts) {
  TempFiles t;
  const std::string cal = t.write("inter.yaml", kInterNodeCalibration);
  const CalibrationSpec spec = load_calibration(cal);
  EXPECT_TRUE(spec.calibrates_inter_node());
  EXPECT_FALSE(spec.calibrates_intra_node());
  ASSERT_TRUE(spec.inter_node_all_to_all.has_value());
  EXPECT_EQ(spec.inter_node_all_to_all->ranks, 16);
  EXPECT_EQ(spec.inter_node_all_to_all->nodes, 2);
  const std::string cluster_path = kRoot + "/hardware/clusters/dgx-a100-2node.yaml";
  const ClusterSpec plain = load_hardware_spec(cluster_path);
  const ClusterSpec c = load_hardware_spec(cluster_path, cal);
  EXPECT_DOUBLE_EQ(c.inter_node.effective_bandwidth(), 21.5e9);
  EXPECT_EQ(c.inter_node.latency_ns, 9000);
  EXPECT_DOUBLE_EQ(c.node.topology.nic_port.bandwidth, 190e9 / 8);
  EXPECT_EQ(c.node.topology.nic_port.latency_ns, 8000);
  EXPECT_DOUBLE_EQ(c.node.intra_node.bandwidth, plain.node.intra_node.bandwidth);  // the node's own
  // Through a node file's calibration: key, a cluster of that node takes the measured link over
  // the one its file gives.
  const std::string node = t.write("node.yaml", "schema_version: 1\nkind: node\nname: dgx\ngpu: " + kRoot +
                                                    "/hardware/gpus/a100-sxm4-40gb.yaml\ngpus_per_node: 8\n"
                                                    "intra_node: {bandwidth: 300 GB/s, latency: 3 us}\n"
                                                    "pcie: {h2d_bandwidth: 25 GB/s, d2h_bandwidth: 25 GB/s, latency: 10 us}\n"
                                                    "calibration: ab.yaml\n");
  t.write("ab.yaml", replaced(kInterNodeCalibration, "nic_port: {bandwidth: 190 Gb/s, efficiency: 0.94, latency: 8 us}\n", ""));
  const ClusterSpec by_key = load_hardware_spec(t.write("cluster.yaml",
                                                        "schema_version: 1\nkind: cluster\nname: two\nnode: node.yaml\n"
                                                        "num_nodes: 2\ninter_node: {bandwidth_per_gpu: 5 GB/s, latency: 2 us}\n"));
  EXPECT_DOUBLE_EQ(by_key.inter_node.effective_bandwidth(), 21.5e9);
  EXPECT_EQ(by_key.inter_node.latency_ns, 9000);
}

TEST(CalibrationLoader, InterNodeSectionsMustFitTheNode) {
  TempFiles t;
  // A node without a topology has no NIC ports; a loopback node has no network at all.
  const std::string cal = t.write("inter.yaml", replaced(kInterNodeCalibration, "A100-SXM4-40GB", "H200-SXM-141GB"));
  std::string msg = input_error_of([&] { load_hardware_spec(kRoot + "/hardware/nodes/hgx-h200.yaml", cal); });
  EXPECT_NE(msg.find("inter.yaml:6:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nic_port: node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has no topology, so the flow model has no NIC port to calibrate"), std::string::npos) << msg;
  const std::string loop_cal = t.write("loop.yaml", replaced(replaced(kInterNodeCalibration, "A100-SXM4-40GB", "H100-SXM5-80GB"),
                                                             "nic_port: {bandwidth: 190 Gb/s, efficiency: 0.94, latency: 8 us}\n", ""));
  msg = input_error_of([&] { load_hardware_spec(kRoot + "/hardware/nodes/h100-loopback-8.yaml", loop_cal); });
  EXPECT_NE(msg.find("loop.yaml:5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("inter_node: node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is a loopback node"), std::string::npos) << msg;
  // The record names its nodes; values are range-checked like a cluster's.
  msg = calibration_error(t, replaced(kInterNodeCalibration, "  nodes: 2\n", ""));
  EXPECT_NE(msg.find("missing required key 'nodes'"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kInterNodeCalibration, "nodes: 2", "nodes: 1"));
  EXPECT_NE(msg.find("bad.yaml:9:"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kInterNodeCalibration, "21.5 GB/s", "21.5 TB/s"));
  EXPECT_NE(msg.find("bad.yaml:5:"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kNetworkCalibration, "  ranks: 8\n", "  ranks: 8\n  nodes: 1\n"));
  EXPECT_NE(msg.find("unknown key 'nodes'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moesim
