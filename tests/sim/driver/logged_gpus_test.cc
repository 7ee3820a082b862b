// Where an nccl-tests log's ranks ran (sim/driver/logged_gpus.h): how many ranks on how many hosts,
// and which of those shapes an all-to-all fit can take as a measurement of a preset: one node's
// GPUs, or every GPU of every node of a cluster.
#include "sim/driver/logged_gpus.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/spec/loader.h"

namespace moesim {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

// `ranks` ranks, `per_host` to a host (node-a, node-b, ...), each on its host's devices 0, 1, ...
std::string log_text(int ranks, int per_host) {
  std::string text = "# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 4(factor) warmup iters: 5 iters: 20\n#\n";
  for (int r = 0; r < ranks; ++r) {
    text += "#  Rank " + std::to_string(r) + " Group  0 Pid  " + std::to_string(100 + r) + " on node-" +
            static_cast<char>('a' + r / per_host) + " device  " + std::to_string(r % per_host) +
            " [0x1b] NVIDIA A100-SXM4-40GB\n";
  }
  text += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
          "busbw #wrong\n        1024           256     float    none      -1    20.00    0.05    0.05      0    "
          "20.00    0.05    0.05    N/A\n";
  return text;
}

TEST(LoggedGpus, TheShapeOfALogIsItsRanksAndHosts) {
  const LoggedShape two = shape_of_log(parse_nccl_tests_text(log_text(16, 8), "two.log"), 0);
  EXPECT_EQ(two.ranks, 16);
  EXPECT_EQ(two.hosts, 2);
  EXPECT_EQ(two.line, 18);  // the last '#  Rank' line
  // Without '#  Rank' lines: --ranks on one host, no line to name.
  std::string bare = log_text(0, 1);
  const LoggedShape unlisted = shape_of_log(parse_nccl_tests_text(bare, "bare.log"), 4);
  EXPECT_EQ(unlisted.ranks, 4);
  EXPECT_EQ(unlisted.hosts, 1);
  EXPECT_EQ(unlisted.line, 0);
}

TEST(LoggedGpus, AnAllToAllLogIsOfAWholeNodeOrOfTheWholeCluster) {
  const ClusterSpec node = load_hardware_spec(kRoot + "/hardware/nodes/dgx-a100.yaml");
  const ClusterSpec two = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  const ClusterSpec eight = load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  // Accepted: one node's GPUs against the node, or against a cluster of it (the node's links);
  // every GPU of every node against the cluster.
  EXPECT_EQ(alltoall_shape_mismatch(LoggedShape{8, 1, 9}, node), "");
  EXPECT_EQ(alltoall_shape_mismatch(LoggedShape{8, 1, 9}, two), "");
  EXPECT_EQ(alltoall_shape_mismatch(LoggedShape{16, 2, 17}, two), "");
  EXPECT_EQ(alltoall_shape_mismatch(LoggedShape{64, 8, 65}, eight), "");
  // Refused: part of a node, part of each node, part of the nodes.
  const std::string part = alltoall_shape_mismatch(LoggedShape{4, 1, 5}, node);
  EXPECT_NE(part.find("the all-to-all ran on 4 ranks on 1 host and node 'DGX-A100-40GB'"), std::string::npos) << part;
  EXPECT_NE(part.find(") has 8 GPUs: a one-node log calibrates the links of the whole node"), std::string::npos) << part;
  const std::string half = alltoall_shape_mismatch(LoggedShape{8, 2, 9}, two);
  EXPECT_NE(half.find("the all-to-all ran on 8 ranks on 2 hosts and '"), std::string::npos) << half;
  EXPECT_NE(half.find(") has 16 GPUs on 2 nodes: a log across nodes calibrates the inter-node network of the whole "
                      "cluster"),
            std::string::npos) << half;
  EXPECT_NE(alltoall_shape_mismatch(LoggedShape{16, 2, 17}, eight).find("has 64 GPUs on 8 nodes"), std::string::npos);
}

}  // namespace
}  // namespace moesim
