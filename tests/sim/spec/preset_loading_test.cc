// Every bundled preset loads, and the presets of the papers carry their published sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sim/engine/interference.h"
#include "sim/net/topology.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/loader.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;

namespace fs = std::filesystem;

const std::string kSourceDir = MOESIM_SOURCE_DIR;

std::vector<std::string> yaml_files_under(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(kSourceDir + "/" + dir)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path().string());
  }
  return out;
}

TEST(PresetTest, EveryModelPresetLoads) {
  const auto files = yaml_files_under("models");
  EXPECT_GE(files.size(), 8u);
  for (const std::string& f : files) {
    EXPECT_NO_THROW({
      const ModelSpec m = load_model_spec(f);
      EXPECT_FALSE(m.name.empty());
      EXPECT_EQ(m.origin.file, f);
    }) << f;
  }
}

TEST(PresetTest, EveryHardwarePresetLoads) {
  std::vector<std::string> files;
  for (const char* kind : {"hardware/gpus", "hardware/nodes", "hardware/clusters"}) {
    const auto some = yaml_files_under(kind);
    files.insert(files.end(), some.begin(), some.end());
  }
  EXPECT_GE(files.size(), 12u);
  for (const std::string& f : files) {
    EXPECT_NO_THROW({
      const ClusterSpec c = load_hardware_spec(f);
      EXPECT_GE(c.num_gpus(), 1);
      EXPECT_GT(c.node.gpu.peak_flops.at(DType::kFp32), 0);
    }) << f;
  }
}

// Calibrations measured on real GPUs (hardware/calibration/) load and apply to their GPU's node.
TEST(PresetTest, EveryCommittedCalibrationAppliesToItsNode) {
  const auto files = yaml_files_under("hardware/calibration");
  EXPECT_GE(files.size(), 1u);
  for (const std::string& f : files) {
    EXPECT_NO_THROW({
      const CalibrationSpec cal = load_calibration(f);
      EXPECT_FALSE(cal.gemm.empty()) << f;
      int applied = 0;
      for (const std::string& n : yaml_files_under("hardware/nodes")) {
        ClusterSpec node = load_hardware_spec(n);
        if (node.node.gpu.name != cal.gpu) continue;
        apply_calibration(node, cal);
        EXPECT_EQ(node.node.gpu.kernel_launch_ns, *cal.kernel_launch_ns) << n;
        ++applied;
      }
      EXPECT_GE(applied, 1) << "no node preset has the GPU " << cal.gpu;
    }) << f;
  }
}

TEST(PresetTest, PaperModelsMatchTableIII) {
  const ModelSpec m = load_model_spec(kSourceDir + "/models/moe-gpt-xl-64e.yaml");
  EXPECT_EQ(m.d_model, 2048);
  EXPECT_EQ(m.d_ffn, 8192);
  EXPECT_EQ(m.num_experts, 64);
  EXPECT_EQ(m.top_k, 1);
  EXPECT_EQ(m.dtype, DType::kFp32);
  EXPECT_EQ(m.gemm_dtype, DType::kTf32);
  EXPECT_EQ(m.activation, Activation::kGelu);
  const ModelSpec s = load_model_spec(kSourceDir + "/models/moe-gpt-s-16e.yaml");
  EXPECT_EQ(s.d_model, 768);
  EXPECT_EQ(s.num_experts, 16);
  EXPECT_EQ(s.num_layers, 12);
}

TEST(PresetTest, CurrentModels) {
  const ModelSpec mix = load_model_spec(kSourceDir + "/models/mixtral-8x7b.yaml");
  EXPECT_EQ(mix.top_k, 2);
  EXPECT_EQ(mix.dtype, DType::kBf16);
  EXPECT_EQ(mix.gemm_dtype, DType::kBf16);
  EXPECT_EQ(mix.fc1_out_dim(), 2 * 14336);
  EXPECT_DOUBLE_EQ(mix.capacity_factor, 1.25);
  const ModelSpec ds = load_model_spec(kSourceDir + "/models/deepseek-v3.yaml");
  EXPECT_EQ(ds.num_experts, 256);
  EXPECT_EQ(ds.top_k, 8);
  EXPECT_EQ(ds.shared_experts.count, 1);
  EXPECT_EQ(ds.shared_experts.d_ffn, 2048);
  EXPECT_EQ(ds.num_layers, 61);
}

TEST(PresetTest, AdiraCluster) {
  const ClusterSpec c = load_hardware_spec(kSourceDir + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  EXPECT_EQ(c.num_nodes, 8);
  EXPECT_EQ(c.node.gpus_per_node, 8);
  EXPECT_EQ(c.num_gpus(), 64);
  EXPECT_DOUBLE_EQ(c.inter_node.bandwidth, 25e9);  // 200 Gb/s x 8 NICs / 8 GPUs
  EXPECT_NEAR(c.inter_node.effective_bandwidth(), 23.5e9, 1e6);
  EXPECT_EQ(c.inter_node.latency_ns, 5000);
  EXPECT_DOUBLE_EQ(c.node.intra_node.bandwidth, 300e9);
  EXPECT_DOUBLE_EQ(c.node.intra_node.efficiency, 0.77);
  EXPECT_DOUBLE_EQ(c.node.pcie_h2d.bandwidth, 25e9);
  EXPECT_EQ(c.node.pcie_d2h.latency_ns, 10000);
  EXPECT_EQ(c.node.gpu.hbm_capacity_bytes, 40 * kGiB);
  EXPECT_DOUBLE_EQ(c.node.gpu.peak_flops.at(DType::kTf32), 156e12);
  EXPECT_EQ(c.node.gpu.kernel_launch_ns, 4000);
  EXPECT_DOUBLE_EQ(c.node.interference.factors[0][1], 0.72);
  EXPECT_THAT(c.node.gpu.origin.file, HasSubstr("a100-sxm4-40gb.yaml"));
}

// The Hopper nodes carry the communication cells measured on their own GPU with
// `moesim_sm_share_probe --factors` (validate/results/h200-2026-11-27, calls 16 and 17), the
// "all" column the same, and keep MPipeMoE's A100 figures in the cells the probe does not measure.
TEST(PresetTest, HopperNodesCarryTheirMeasuredInterferenceCells) {
  struct Case {
    const char* file;
    double computation, communication;
  };
  for (const Case& k : {Case{"hgx-h200.yaml", 0.552, 0.670}, Case{"hgx-h100.yaml", 0.538, 0.690},
                        Case{"h100-loopback-8.yaml", 0.538, 0.690}}) {
    const auto& f = load_hardware_spec(kSourceDir + "/hardware/nodes/" + k.file).node.interference.factors;
    const InterferenceTable a100;
    EXPECT_DOUBLE_EQ(f[1][0], k.computation) << k.file;    // computation with communication
    EXPECT_DOUBLE_EQ(f[1][3], k.computation) << k.file;    // computation with all
    EXPECT_DOUBLE_EQ(f[0][1], k.communication) << k.file;  // communication with computation
    EXPECT_DOUBLE_EQ(f[0][3], k.communication) << k.file;  // communication with all
    EXPECT_EQ(f[0][2], a100.factors[0][2]) << k.file;      // communication with memcpy
    EXPECT_EQ(f[2], a100.factors[2]) << k.file;            // the memcpy row
  }
}

// The Hopper nodes carry the GEMM-size table of validate/results/h200-2026-11-28 (calls 2-3):
// half speed for GEMMs of one or two tiles per SM, most of it kept by large ones. The A100 nodes
// have none (not measured there): their GEMMs take the cell.
TEST(PresetTest, HopperNodesCarryTheGemmSizeTable) {
  for (const char* file : {"hgx-h200.yaml", "hgx-h100.yaml", "h100-loopback-8.yaml"}) {
    const auto& t = load_hardware_spec(kSourceDir + "/hardware/nodes/" + file).node.interference;
    ASSERT_EQ(t.gemm_with_communication.size(), 8u) << file;
    EXPECT_DOUBLE_EQ(gemm_with_communication(t.gemm_with_communication, 63550), 0.525) << file;
    EXPECT_DOUBLE_EQ(gemm_with_communication(t.gemm_with_communication, 508400), 0.790) << file;
  }
  for (const char* file : {"dgx-a100.yaml", "dgx-a100-80gb.yaml"})
    EXPECT_TRUE(load_hardware_spec(kSourceDir + "/hardware/nodes/" + file).node.interference.gemm_with_communication.empty())
        << file;
}

// The Selene-like and DGX H100 clusters grow or shrink with --gpus to the GPU counts of
// Korthikanti et al. 2022 (8, 64, 280, 512, 2,240) and Narayanan et al. 2021 (32 ... 3,072), the
// last rail leaf holding what is left of the nodes (35 nodes on 20-node leaves: 20 + 15).
TEST(PresetTest, PaperClustersScaleToThePapersGpuCounts) {
  struct Case {
    const char* file;
    const char* gpu;
    int nodes, per_leaf;
    double per_gpu;  // inter-node bytes/s per GPU before efficiency
  };
  for (const Case& k : {Case{"dgx-a100-80gb-hdr.yaml", "a100-sxm4-80gb.yaml", 384, 20, 25e9},
                        Case{"dgx-h100-ndr.yaml", "h100-sxm5.yaml", 128, 32, 50e9}}) {
    SCOPED_TRACE(k.file);
    const ClusterSpec preset = load_hardware_spec(kSourceDir + "/hardware/clusters/" + k.file);
    EXPECT_EQ(preset.num_nodes, k.nodes);
    EXPECT_EQ(preset.node.gpus_per_node, 8);
    EXPECT_EQ(preset.node.gpu.hbm_capacity_bytes, 80 * kGiB);
    EXPECT_THAT(preset.node.gpu.origin.file, HasSubstr(k.gpu));
    EXPECT_DOUBLE_EQ(preset.inter_node.bandwidth, k.per_gpu);
    EXPECT_EQ(preset.fabric.kind, FabricKind::kRailOptimized);
    EXPECT_EQ(preset.fabric.nodes_per_leaf, k.per_leaf);
    EXPECT_EQ(preset.node.topology.num_nics, 8);
    for (int gpus : {8, 32, 64, 280, 512, 1024, 1536, 1920, 2240, 2520, 3072}) {
      SCOPED_TRACE(gpus);
      EXPECT_EQ(gpu_count_problem(preset, gpus), "");
      const ClusterSpec c = with_gpus(preset, gpus, SourceLocation{}, "--gpus");
      EXPECT_EQ(c.num_gpus(), gpus);
      EXPECT_EQ(c.num_nodes, gpus / 8);
      EXPECT_EQ(c.fabric.nodes_per_leaf, k.per_leaf);
    }
    EXPECT_THAT(gpu_count_problem(preset, 300), HasSubstr("not a multiple of the 8 GPUs per node"));
  }
  // 35 nodes: rail k of the 15 nodes past the first 20 is a leaf of its own.
  const ClusterSpec selene = load_hardware_spec(kSourceDir + "/hardware/clusters/dgx-a100-80gb-hdr.yaml");
  const ClusterTopology topo(with_gpus(selene, 280, SourceLocation{}, "--gpus"));
  EXPECT_EQ(topo.num_nodes(), 35);
  EXPECT_EQ(topo.leaf_of(19, 3), 3);
  EXPECT_EQ(topo.leaf_of(20, 3), 8 + 3);
  EXPECT_EQ(topo.leaf_of(34, 7), 8 + 7);
}

TEST(PresetTest, ValorSharesOneNicPerNode) {
  const ClusterSpec c = load_hardware_spec(kSourceDir + "/hardware/clusters/valor-4x-v100.yaml");
  EXPECT_EQ(c.num_gpus(), 16);
  EXPECT_DOUBLE_EQ(c.inter_node.bandwidth, 56e9 / 8 / 4);
  EXPECT_EQ(c.node.gpu.peak_flops.count(DType::kBf16), 0u);
  EXPECT_EQ(c.node.gpu.peak_flops.count(DType::kTf32), 0u);
  EXPECT_DOUBLE_EQ(c.node.gpu.peak_flops.at(DType::kFp16), 125e12);
}

TEST(PresetTest, GpuAndNodeFilesAreOneNodeClusters) {
  const ClusterSpec g = load_hardware_spec(kSourceDir + "/hardware/gpus/h200.yaml");
  EXPECT_EQ(g.num_gpus(), 1);
  EXPECT_EQ(g.node.gpu.hbm_capacity_bytes, 141'000'000'000);
  EXPECT_DOUBLE_EQ(g.node.gpu.hbm_bandwidth, 4.8e12);
  const ClusterSpec n = load_hardware_spec(kSourceDir + "/hardware/nodes/hgx-h100.yaml");
  EXPECT_EQ(n.num_nodes, 1);
  EXPECT_EQ(n.num_gpus(), 8);
  EXPECT_EQ(n.name, "HGX-H100");
}

// ---- model files ----

}  // namespace
}  // namespace moesim
