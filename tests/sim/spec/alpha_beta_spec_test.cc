// The `alpha_beta` section of hardware files: PipeMoE's linear constants, given as a rate or as a
// published seconds-per-unit number, and the strict rules around them.
#include <gtest/gtest.h>

#include <string>

#include "sim/spec/loader.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using testing::input_error_of;
using testing::TempFiles;

const std::string kRoot = MOESIM_SOURCE_DIR;

std::string cluster_with(const std::string& alpha_beta) {
  return "schema_version: 1\nkind: cluster\nname: c\nnode: " + kRoot +
         "/hardware/nodes/dgx-a100.yaml\nnum_nodes: 1\n" + alpha_beta;
}

TEST(AlphaBetaSpecTest, RatesAndPublishedConstants) {
  TempFiles t;
  const ClusterSpec c = load_hardware_spec(t.write(
      "c.yaml", cluster_with("alpha_beta:\n  all_to_all: {alpha: 20 us, bandwidth: 50 GB/s}\n"
                             "  gemm: {alpha: 10 us, beta_s_per_flop: 2.5e-14}\n")));
  ASSERT_TRUE(c.alpha_beta.has_value());
  EXPECT_DOUBLE_EQ(c.alpha_beta->a2a_alpha_s, 20e-6);
  EXPECT_DOUBLE_EQ(c.alpha_beta->a2a_beta_s_per_byte, 1.0 / 50e9);
  EXPECT_DOUBLE_EQ(c.alpha_beta->gemm_alpha_s, 10e-6);
  EXPECT_DOUBLE_EQ(c.alpha_beta->gemm_beta_s_per_flop, 2.5e-14);
  EXPECT_FALSE(c.alpha_beta->simulate);  // constants for the pipemoe method only, by default
  EXPECT_FALSE(c.pure_alpha_beta());
  EXPECT_EQ(c.alpha_beta->origin.line, 7);
}

TEST(AlphaBetaSpecTest, PresetSimulatesWithPureCosts) {
  const ClusterSpec c = load_hardware_spec(kRoot + "/hardware/clusters/pipemoe-alpha-beta.yaml");
  ASSERT_TRUE(c.pure_alpha_beta());
  EXPECT_DOUBLE_EQ(c.alpha_beta->gemm_beta_s_per_flop, 1.0 / 100e12);
}

TEST(AlphaBetaSpecTest, NodeFileMayCarryItButAReferencedNodeMayNot) {
  TempFiles t;
  const std::string node = t.write(
      "node.yaml", "schema_version: 1\nkind: node\nname: n\ngpu: " + kRoot +
                       "/hardware/gpus/a100-sxm4-40gb.yaml\ngpus_per_node: 1\n"
                       "pcie: {h2d_bandwidth: 25 GB/s, d2h_bandwidth: 25 GB/s, latency: 10 us}\n"
                       "alpha_beta:\n  all_to_all: {alpha: 1 us, bandwidth: 10 GB/s}\n"
                       "  gemm: {alpha: 1 us, flop_rate: 10 TFLOP/s}\n  simulate: true\n");
  EXPECT_TRUE(load_hardware_spec(node).pure_alpha_beta());
  const std::string cluster = t.write("c.yaml", "schema_version: 1\nkind: cluster\nname: c\nnode: node.yaml\nnum_nodes: 1\n");
  const std::string msg = input_error_of([&] { load_hardware_spec(cluster); });
  EXPECT_NE(msg.find("unknown key 'alpha_beta'"), std::string::npos) << msg;
}

TEST(AlphaBetaSpecTest, StrictRules) {
  TempFiles t;
  const auto error = [&](const std::string& section) {
    const std::string path = t.write("c.yaml", cluster_with(section));
    return input_error_of([&] { load_hardware_spec(path); });
  };
  const std::string gemm = "  gemm: {alpha: 10 us, flop_rate: 100 TFLOP/s}\n";
  std::string msg = error("alpha_beta:\n  all_to_all: {alpha: 20 us, bandwidth: 50 GB/s, beta_s_per_byte: 1e-11}\n" + gemm);
  EXPECT_NE(msg.find("not both"), std::string::npos) << msg;
  EXPECT_NE(msg.find("c.yaml:7:"), std::string::npos) << msg;
  msg = error("alpha_beta:\n  all_to_all: {alpha: 20 us}\n" + gemm);
  EXPECT_NE(msg.find("give bandwidth or beta_s_per_byte"), std::string::npos) << msg;
  msg = error("alpha_beta:\n  all_to_all: {alpha: 20, bandwidth: 50 GB/s}\n" + gemm);
  EXPECT_NE(msg.find("unit"), std::string::npos) << msg;
  msg = error("alpha_beta:\n  all_to_all: {alpha: 20 us, beta_s_per_byte: -1e-11}\n" + gemm);
  EXPECT_NE(msg.find("beta_s_per_byte"), std::string::npos) << msg;
  msg = error("alpha_beta:\n  all_to_all: {alpha: 20 us, bandwidth: 50 GB/s}\n");
  EXPECT_NE(msg.find("missing required key 'gemm'"), std::string::npos) << msg;
  msg = error("alpha_beta:\n  all_to_all: {alpha: 20 us, bandwidth: 50 GB/s}\n" + gemm + "  simulte: true\n");
  EXPECT_NE(msg.find("did you mean 'simulate'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moesim
