// HostCopyModel: copies as flows over the GPU's own PCIe link, the switch uplinks of the node
// topology and the host memory (docs/concepts.md, "Host copies"). Round numbers: every link
// carries 10 B/ns (1e10 B/s) unless a test says otherwise, so 10,000 B take 1000 ns alone.
#include "sim/cost/host_copy_model.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "sim/engine/engine.h"
#include "sim/engine/trace_recorder.h"
#include "sim/spec/loader.h"
#include "../spec/spec_test_util.h"
#include "../task_builders.h"

namespace moesim {
namespace {

using testing::input_error_of;
using testing::copy_task;

const std::string kRoot = MOESIM_SOURCE_DIR;

TopoLink pcie_link(TopoDevice a, TopoDevice b) { return TopoLink{a, b, "pcie", 1, {}}; }

// gpus GPUs, two per PCIe switch, every switch's uplink to cpu0 (one CPU: one host memory).
ClusterSpec switched_node(int gpus, double host_bytes_per_s = 1e13) {
  ClusterSpec c;
  c.name = "switched";
  c.node.name = "switched-node";
  c.node.gpus_per_node = gpus;
  c.node.pcie_d2h = {1e10, 1.0, 0};
  c.node.pcie_h2d = {1e10, 1.0, 0};
  c.node.host_memory = {host_bytes_per_s, 1.0, 0};
  NodeTopology& t = c.node.topology;
  t.present = true;
  t.num_pcie_switches = gpus / 2;
  t.num_cpus = 1;
  t.link_types["pcie"] = LinkSpec{1e10, 1.0, 0};
  for (int g = 0; g < gpus; ++g) t.links.push_back(pcie_link({TopoDeviceKind::kGpu, g}, {TopoDeviceKind::kPcieSwitch, g / 2}));
  for (int s = 0; s < gpus / 2; ++s) t.links.push_back(pcie_link({TopoDeviceKind::kPcieSwitch, s}, {TopoDeviceKind::kCpu, 0}));
  return c;
}

Trace run_copies(const TaskGraph& g, const ClusterSpec& c) {
  Engine engine(g);
  engine.add_model(std::make_unique<HostCopyModel>(g, c));
  TraceRecorder rec(g.num_tasks());
  engine.add_observer(&rec);
  engine.run();
  return rec.take();
}

TEST(HostCopyModel, HandlesHostCopiesOnly) {
  const ClusterSpec c = switched_node(2);
  const TaskGraph g(2, {0, 1});
  const HostCopyModel m(g, c);
  EXPECT_TRUE(m.handles(copy_task("x", 0, CopyDirection::kDeviceToHost, 1)));
  EXPECT_TRUE(m.handles(copy_task("y", 0, CopyDirection::kHostToDevice, 1)));
  Task d2d = copy_task("z", 0, CopyDirection::kDeviceToDevice, 1);
  d2d.stream = StreamClass::kCompute;
  EXPECT_FALSE(m.handles(d2d));
  EXPECT_EQ(m.name(), "host_copy");
}

// gpu0 and gpu1 sit behind switch 0, whose uplink (10 B/ns) they share: 5 B/ns each, 2000 ns.
// gpu2 is alone behind switch 1 and keeps its 10 B/ns.
TEST(HostCopyModel, TwoGpusBehindOneSwitchEachGetHalfItsUplink) {
  const ClusterSpec c = switched_node(4);
  TaskGraph g(4, {0, 1, 2, 3});
  const auto a = g.add_task(copy_task("a", 0, CopyDirection::kDeviceToHost, 10000));
  const auto b = g.add_task(copy_task("b", 1, CopyDirection::kDeviceToHost, 10000));
  const auto d = g.add_task(copy_task("d", 2, CopyDirection::kDeviceToHost, 10000));
  const Trace t = run_copies(g, c);
  EXPECT_EQ(t.records[a].end_ns, 2000);
  EXPECT_EQ(t.records[b].end_ns, 2000);
  EXPECT_EQ(t.records[d].end_ns, 1000);
}

// One representative rank stands for all four: its neighbour behind switch 0 copies the same
// bytes at the same time, so the representative sees the shared uplink as the all-ranks run does.
TEST(HostCopyModel, RepresentativeRankCountsTheGpusItStandsFor) {
  const ClusterSpec c = switched_node(4);
  TaskGraph one(4, {0});
  const auto a = one.add_task(copy_task("a", 0, CopyDirection::kDeviceToHost, 10000));
  EXPECT_EQ(run_copies(one, c).records[a].end_ns, 2000);

  TaskGraph all(4, {0, 1, 2, 3});
  for (int r = 0; r < 4; ++r) all.add_task(copy_task("a", r, CopyDirection::kDeviceToHost, 10000));
  const Trace t = run_copies(all, c);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(t.records[static_cast<std::size_t>(r)].end_ns, 2000);
}

// PCIe is full duplex and a GPU has a copy engine per direction: a D2H and an H2D of one GPU,
// or of two GPUs behind one switch, overlap at the full rate.
TEST(HostCopyModel, DeviceToHostAndHostToDeviceOverlapAtFullRate) {
  const ClusterSpec c = switched_node(2);
  TaskGraph same(2, {0, 1});
  const auto a = same.add_task(copy_task("a", 0, CopyDirection::kDeviceToHost, 10000));
  const auto b = same.add_task(copy_task("b", 0, CopyDirection::kHostToDevice, 10000));
  const Trace t = run_copies(same, c);
  EXPECT_EQ(t.records[a].end_ns, 1000);
  EXPECT_EQ(t.records[b].end_ns, 1000);

  TaskGraph neighbours(2, {0, 1});
  const auto x = neighbours.add_task(copy_task("x", 0, CopyDirection::kDeviceToHost, 10000));
  const auto y = neighbours.add_task(copy_task("y", 1, CopyDirection::kHostToDevice, 10000));
  const Trace u = run_copies(neighbours, c);
  EXPECT_EQ(u.records[x].end_ns, 1000);
  EXPECT_EQ(u.records[y].end_ns, 1000);
}

// Eight GPUs without a topology, host memory 40 B/ns: a node-wide offload (one representative
// rank standing for all eight) gets 40 / 8 = 5 B/ns per GPU, not its 10 B/ns link. Host memory
// serves both directions: a prefetch running beside it halves that again (16 flows, 2.5 B/ns).
TEST(HostCopyModel, HostMemoryCapsANodeWideOffload) {
  ClusterSpec c = switched_node(8, 4e10);
  c.node.topology = NodeTopology{};
  TaskGraph g(8, {0});
  const auto a = g.add_task(copy_task("a", 0, CopyDirection::kDeviceToHost, 10000));
  EXPECT_EQ(run_copies(g, c).records[a].end_ns, 2000);

  TaskGraph both(8, {0});
  const auto x = both.add_task(copy_task("x", 0, CopyDirection::kDeviceToHost, 10000));
  const auto y = both.add_task(copy_task("y", 0, CopyDirection::kHostToDevice, 10000));
  const Trace t = run_copies(both, c);
  EXPECT_EQ(t.records[x].end_ns, 4000);
  EXPECT_EQ(t.records[y].end_ns, 4000);
}

// With a topology each CPU holds an equal part of the host memory: two CPUs of 20 B/ns each
// (40 in all) under four GPUs, each pair behind a switch to its own CPU with a wide uplink.
TEST(HostCopyModel, EachCpuServesTheGpusBehindIt) {
  ClusterSpec c = switched_node(4, 2e10);
  NodeTopology& t = c.node.topology;
  t.num_cpus = 2;
  t.link_types["wide"] = LinkSpec{1e11, 1.0, 0};
  t.links.resize(4);
  t.links.push_back(TopoLink{{TopoDeviceKind::kPcieSwitch, 0}, {TopoDeviceKind::kCpu, 0}, "wide", 1, {}});
  t.links.push_back(TopoLink{{TopoDeviceKind::kPcieSwitch, 1}, {TopoDeviceKind::kCpu, 1}, "wide", 1, {}});
  TaskGraph g(4, {0, 1, 2, 3});
  const auto a = g.add_task(copy_task("a", 0, CopyDirection::kDeviceToHost, 10000));
  const auto b = g.add_task(copy_task("b", 1, CopyDirection::kDeviceToHost, 10000));
  const auto d = g.add_task(copy_task("d", 2, CopyDirection::kDeviceToHost, 10000));
  const Trace r = run_copies(g, c);
  EXPECT_EQ(r.records[a].end_ns, 2000);  // cpu0's 10 B/ns shared by gpu0 and gpu1
  EXPECT_EQ(r.records[b].end_ns, 2000);
  EXPECT_EQ(r.records[d].end_ns, 1000);  // gpu2 alone on cpu1
}

// Latency first (no bandwidth used), then bytes: 500 ns + 1000 ns. A second copy in the same
// direction on another rank of the same physical GPU (a loopback node) waits for the one copy
// engine and pays its latency when it gets it: 1500 + 500 + 1000 = 3000.
TEST(HostCopyModel, LatencyThenBytesAndOneEnginePerDirection) {
  ClusterSpec base = switched_node(1);
  base.node.topology = NodeTopology{};
  base.node.pcie_d2h.latency_ns = 500;
  base.node.interference = InterferenceTable{};
  const ClusterSpec c = loopback_cluster(base, 2);
  TaskGraph g(2, {0, 1});
  const auto a = g.add_task(copy_task("a", 0, CopyDirection::kDeviceToHost, 10000));
  const auto b = g.add_task(copy_task("b", 1, CopyDirection::kDeviceToHost, 10000));
  Engine engine(g);
  engine.add_model(std::make_unique<HostCopyModel>(g, c));
  engine.share_devices({0, 0});
  TraceRecorder rec(g.num_tasks());
  engine.add_observer(&rec);
  engine.run();
  const Trace t = rec.take();
  EXPECT_EQ(t.records[a].end_ns, 1500);
  EXPECT_EQ(t.records[b].end_ns, 3000);
}

// A d2h copy of 10000 B (1000 ns alone) overlapping compute: memcpy-with-computation = 0.98 scales
// the GPU's own link. ceil(1000 / 0.98) = 1021. When compute stops at 510 the copy has done
// 510 * 0.98 = 499.8 ns of work; 500.2 remain at full speed -> 510 + 501 = 1011.
TEST(HostCopyModel, InterferenceScalesTheGpusOwnLink) {
  ClusterSpec c = switched_node(2);
  c.node.topology = NodeTopology{};
  TaskGraph g(1, {0});
  const TaskIndex i = g.add_task(copy_task("offload", 0, CopyDirection::kDeviceToHost, 10000));
  HostCopyModel m(g, c);
  Concurrency busy(1);
  busy.add(0, StreamClass::kCopyD2H, 1);
  busy.add(0, StreamClass::kCompute, 1);
  m.start(i, 0, busy);
  EXPECT_EQ(m.next_completion(), 1021);
  EXPECT_DOUBLE_EQ(m.rate_bytes_per_ns(i), 10 * 0.98);
  busy.add(0, StreamClass::kCompute, -1);
  const int ranks[] = {0};
  m.on_concurrency_change(ranks, 510, busy);
  EXPECT_EQ(m.next_completion(), 1011);
  std::vector<TaskIndex> done;
  m.advance_to(1011, done);
  EXPECT_EQ(done, std::vector<TaskIndex>{i});
}

TEST(HostCopyModel, RefusesACopyOverNoBandwidth) {
  ClusterSpec c = switched_node(1);
  c.node.pcie_h2d = {};
  TaskGraph g(1, {0});
  g.add_task(copy_task("prefetch", 0, CopyDirection::kHostToDevice, 10));
  EXPECT_NE(input_error_of([&] { run_copies(g, c); }).find("has no pcie_h2d bandwidth"), std::string::npos);
}

// The DGX A100 file: gpu0 and gpu1 share switch pcie0's uplink to cpu0; gpu2 has its own switch;
// gpu4 reaches cpu1's memory. D2H and H2D cross each link in opposite directions.
TEST(HostLinks, DgxA100PathsFollowTheTopology) {
  const ClusterSpec c = load_hardware_spec(kRoot + "/hardware/nodes/dgx-a100.yaml");
  const HostLinks links(c);
  ASSERT_TRUE(links.uses_topology());
  const auto d2h0 = links.shared_path(0, CopyDirection::kDeviceToHost);
  const auto d2h1 = links.shared_path(1, CopyDirection::kDeviceToHost);
  const auto d2h2 = links.shared_path(2, CopyDirection::kDeviceToHost);
  const auto h2d0 = links.shared_path(0, CopyDirection::kHostToDevice);
  const auto d2h4 = links.shared_path(4, CopyDirection::kDeviceToHost);
  ASSERT_EQ(d2h0.size(), 3u);  // gpu0 -> pcie0, pcie0 -> cpu0, cpu0's memory
  EXPECT_NE(d2h0[0], d2h1[0]);  // each GPU's port on the switch
  EXPECT_EQ(d2h0[1], d2h1[1]);  // the shared uplink
  EXPECT_NE(d2h0[1], d2h2[1]);
  EXPECT_NE(d2h0[1], h2d0[1]);  // full duplex
  EXPECT_EQ(d2h0[2], h2d0[2]);  // one host memory for both directions
  EXPECT_NE(d2h0[2], d2h4[2]);  // cpu1's memory
  // The uplink: one PCIe 4.0 x16 at 0.8 = 25.6 B/ns; cpu0's memory: half of 409.6 GB/s x 0.75.
  EXPECT_NEAR(links.capacity(d2h0[1]), 25.6, 1e-9);
  EXPECT_NEAR(links.capacity(d2h0[2]), c.node.host_memory.effective_bandwidth() / 2 / 1e9, 1e-9);
}

}  // namespace
}  // namespace moesim
