// The `nccl:` section of a node file: NCCL's defaults when absent, overrides key by key, and bad
// values refused with file:line:col and the rule.
#include "sim/spec/nccl_tuning.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/spec/loader.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using testing::input_error_of;
using testing::TempFiles;

// A node whose `nccl:` section is `section` (indented by two spaces, starting at line 17).
std::string node_with(const std::string& section) {
  return "schema_version: 1\n"                                  // 1
         "kind: node\n"                                         // 2
         "name: n\n"                                            // 3
         "gpu:\n"                                               // 4
         "  name: g\n"                                          // 5
         "  peak_flops: {fp32: 19.5 TFLOP/s}\n"                 // 6
         "  hbm_bandwidth: 1555 GB/s\n"                         // 7
         "  hbm_capacity: 40 GiB\n"                             // 8
         "  kernel_launch_overhead: 4 us\n"                     // 9
         "  sm_count: 108\n"                                    // 10
         "gpus_per_node: 8\n"                                   // 11
         "intra_node: {bandwidth: 300 GB/s, latency: 3 us}\n"   // 12
         "pcie:\n"                                              // 13
         "  h2d_bandwidth: 25 GB/s\n"                           // 14
         "  d2h_bandwidth: 25 GB/s\n"                           // 15
         "  latency: 10 us\n"                                   // 16
         "nccl:\n" +                                            // 17
         section;
}

ClusterSpec load(const TempFiles& files, const std::string& section) {
  return load_hardware_spec(files.write("n.yaml", node_with(section)));
}

TEST(NcclTuning, DefaultsAreNccl219s) {
  const NcclTuning t;
  EXPECT_EQ(t.base(NcclAlgorithm::kRing, NcclProtocol::kSimple), 8400);
  EXPECT_EQ(t.base(NcclAlgorithm::kTree, NcclProtocol::kLL), 6800);
  EXPECT_EQ(t.hop(NcclHop::kNvlink, NcclAlgorithm::kRing, NcclProtocol::kLL128), 1900);
  EXPECT_EQ(t.hop(NcclHop::kNet, NcclAlgorithm::kRing, NcclProtocol::kSimple), 14000);
  EXPECT_EQ(t.hop(NcclHop::kPcie, NcclAlgorithm::kTree, NcclProtocol::kLL), 1000);
  EXPECT_DOUBLE_EQ(t.efficiency_of(NcclAlgorithm::kRing, NcclProtocol::kLL), 0.25);
  EXPECT_DOUBLE_EQ(t.efficiency_of(NcclAlgorithm::kRing, NcclProtocol::kLL128), 0.92);
  EXPECT_DOUBLE_EQ(t.efficiency_of(NcclAlgorithm::kTree, NcclProtocol::kSimple), 0.92);
  EXPECT_EQ(t.channels, 32);
  // A preset without the section gets them.
  TempFiles files;
  const std::string text = node_with("");
  const ClusterSpec c = load_hardware_spec(files.write("plain.yaml", text.substr(0, text.size() - 6)));
  EXPECT_EQ(c.node.nccl.base(NcclAlgorithm::kRing, NcclProtocol::kLL), 6600);
}

TEST(NcclTuning, KeysOverrideTheirEntriesOnly) {
  TempFiles files;
  const ClusterSpec c = load(files,
                             "  intra: pcie\n"
                             "  protocols: [ll, simple]\n"
                             "  algorithms: [ring]\n"
                             "  channels: 8\n"
                             "  base_latency: {ring: {ll: 5 us}}\n"
                             "  hop_latency: {net: {tree: {simple: 20 us}}}\n"
                             "  efficiency: {ring: {simple: 0.95}}\n");
  const NcclTuning& t = c.node.nccl;
  EXPECT_EQ(t.intra_hop, NcclHop::kPcie);
  EXPECT_TRUE(t.enabled(NcclAlgorithm::kRing, NcclProtocol::kLL));
  EXPECT_FALSE(t.enabled(NcclAlgorithm::kRing, NcclProtocol::kLL128));
  EXPECT_FALSE(t.enabled(NcclAlgorithm::kTree, NcclProtocol::kSimple));
  EXPECT_EQ(t.channels, 8);
  EXPECT_EQ(t.base(NcclAlgorithm::kRing, NcclProtocol::kLL), 5000);
  EXPECT_EQ(t.base(NcclAlgorithm::kRing, NcclProtocol::kSimple), 8400);
  EXPECT_EQ(t.hop(NcclHop::kNet, NcclAlgorithm::kTree, NcclProtocol::kSimple), 20000);
  EXPECT_EQ(t.hop(NcclHop::kNet, NcclAlgorithm::kRing, NcclProtocol::kSimple), 14000);
  EXPECT_DOUBLE_EQ(t.efficiency_of(NcclAlgorithm::kRing, NcclProtocol::kSimple), 0.95);
  EXPECT_DOUBLE_EQ(t.efficiency_of(NcclAlgorithm::kRing, NcclProtocol::kLL), 0.25);
}

TEST(NcclTuning, BadValuesNameTheFileLineAndRule) {
  TempFiles files;
  const auto error = [&](const std::string& section) { return input_error_of([&] { load(files, section); }); };
  EXPECT_THAT(error("  efficiency: {ring: {ll128: 1.2}}\n"),
              HasSubstr("n.yaml:18:30: nccl.efficiency.ring.ll128: must be in (0, 1], found 1.2"));
  EXPECT_THAT(error("  efficiency: {tree: {ll: 0}}\n"), HasSubstr("nccl.efficiency.tree.ll: must be in (0, 1]"));
  EXPECT_THAT(error("  hop_latency: {nvlink: {ring: {ll: -1 us}}}\n"),
              HasSubstr("n.yaml:18:37: nccl.hop_latency.nvlink.ring.ll: must not be negative, found '-1 us'"));
  EXPECT_THAT(error("  base_latency: {ring: {simple: -8.4 us}}\n"), HasSubstr("must not be negative"));
  EXPECT_THAT(error("  protocols: [ll, ll256]\n"),
              HasSubstr("n.yaml:18:19: nccl.protocols[1]: unknown protocol 'll256'; valid values: ll, ll128, simple"));
  EXPECT_THAT(error("  protocols: []\n"), HasSubstr("nccl.protocols: lists no protocols"));
  EXPECT_THAT(error("  protocols: [ll, ll]\n"), HasSubstr("'ll' is listed twice"));
  EXPECT_THAT(error("  algorithms: [nvls]\n"), HasSubstr("unknown algorithm 'nvls'; valid values: ring, tree"));
  EXPECT_THAT(error("  efficiency: {ring: {lL: 0.5}}\n"), HasSubstr("unknown key 'lL'"));
  EXPECT_THAT(error("  hop_latency: {nic: {}}\n"), HasSubstr("unknown key 'nic'"));
  EXPECT_THAT(error("  intra: nvswitch\n"), HasSubstr("nccl.intra: unknown value 'nvswitch'; valid values: nvlink, pcie"));
  EXPECT_THAT(error("  channels: 0\n"), HasSubstr("nccl.channels"));
}

}  // namespace
}  // namespace moesim
