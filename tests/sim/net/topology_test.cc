// The cluster link graph and NCCL-like routing on the hardware presets.
#include "sim/net/topology.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/spec/loader.h"

namespace moesim {
namespace {

const std::string kSourceDir = MOESIM_SOURCE_DIR;

std::vector<std::string> route_names(const ClusterTopology& t, int a, int b) {
  std::vector<LinkId> r;
  t.route(a, b, r);
  std::vector<std::string> names;
  for (LinkId l : r) names.push_back(t.link_name(l));
  return names;
}

TEST(ClusterTopology, DgxA100RoutesOverTheNvSwitchPortsAndTheGpusOwnNic) {
  const ClusterSpec c = load_hardware_spec(kSourceDir + "/hardware/clusters/dgx-a100-2node.yaml");
  const ClusterTopology t(c);
  EXPECT_EQ(boost::num_vertices(t.node_graph()), 8u + 6 + 4 + 2 + 8);
  EXPECT_EQ(route_names(t, 0, 5), (std::vector<std::string>{"node0.gpu0->nvswitch", "node0.gpu5<-nvswitch"}));
  // 12 lanes x 25 GB/s x 0.77 = 231 GB/s.
  std::vector<LinkId> r;
  t.route(0, 5, r);
  EXPECT_DOUBLE_EQ(t.link(r[0]).capacity, 231.0);
  // Rail-optimised: GPU 3 -> GPU 11 (local 3) stays on rail 3's leaf; GPU 3 -> GPU 12 crosses the spine.
  EXPECT_EQ(route_names(t, 3, 11),
            (std::vector<std::string>{"node0.gpu3->pcie1", "node0.pcie1->nic3", "node0.nic3->leaf",
                                      "node1.nic3<-leaf", "node1.nic3->pcie1", "node1.pcie1->gpu3"}));
  EXPECT_EQ(route_names(t, 3, 12).size(), 8u);
  EXPECT_EQ(route_names(t, 3, 12)[3], "leaf3->spine");
  EXPECT_EQ(t.route_latency(0, 5), 3000);
  EXPECT_EQ(t.route_latency(0, 9), 5000);
}

TEST(ClusterTopology, Dgx1PairsWithoutNvlinkGoOverPcieNotThroughAThirdGpu) {
  const ClusterSpec c = load_hardware_spec(kSourceDir + "/hardware/nodes/dgx-1-v100.yaml");
  const ClusterTopology t(c);
  EXPECT_EQ(route_names(t, 0, 3), (std::vector<std::string>{"node0.gpu0->gpu3"}));
  std::vector<LinkId> r;
  t.route(0, 3, r);
  EXPECT_DOUBLE_EQ(t.link(r[0]).capacity, 40.0);  // 2 lanes x 25 GB/s x 0.8
  // GPU 0 and GPU 5 share no NVLink: PCIe switch 0 -> CPU 0 -> QPI -> CPU 1 -> PCIe switch 2.
  EXPECT_EQ(route_names(t, 0, 5),
            (std::vector<std::string>{"node0.gpu0->pcie0", "node0.pcie0->cpu0", "node0.cpu0->cpu1",
                                      "node0.cpu1->pcie2", "node0.pcie2->gpu5"}));
}

TEST(ClusterTopology, OversubscribedLeafUplinks) {
  ClusterSpec c = load_hardware_spec(kSourceDir + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  c.fabric.kind = FabricKind::kFatTree;
  c.fabric.nodes_per_leaf = 4;
  c.fabric.oversubscription = 2;
  const ClusterTopology t(c);
  // A leaf holds 4 nodes x 8 NICs x 23.5 GB/s down; its uplink is half of that.
  std::vector<LinkId> r;
  t.route(0, 63, r);
  EXPECT_EQ(t.link_name(r[3]), "leaf0->spine");
  EXPECT_DOUBLE_EQ(t.link(r[3]).capacity, 4 * 8 * 23.5 / 2);
}

TEST(ClusterTopology, ClusterWithoutTopologyIsAnInputError) {
  ClusterSpec c = load_hardware_spec(kSourceDir + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  c.fabric.present = false;
  EXPECT_THROW(ClusterTopology{c}, InputError);
  c.node.topology.present = false;
  EXPECT_THROW(ClusterTopology{c}, InputError);
}

}  // namespace
}  // namespace moesim
