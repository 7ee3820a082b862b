// Latency-bound rings' steps as one coflow (sim/net/tuned_plan.h), against the per-step formula and
// against one flow per hop and step (PlanOptions::aggregate = false), alone and beside other
// traffic.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/net/nccl_model.h"
#include "sim/net/tuned_plan.h"
#include "tests/sim/net/net_test_util.h"

namespace moesim {
namespace {

using net_test::iota;
using net_test::preset;
using net_test::run;

CollectivePlan ring_plan(const ClusterTopology& t, const ClusterSpec& c, CollectiveOp op, std::int64_t b,
                         const std::vector<int>& group, bool coflow) {
  return plan_collective(t, c, CollectiveWork{op, 0, b}, group, PlanOptions{{}, coflow});
}

int ring_steps(CollectiveOp op, int p) { return op == CollectiveOp::kAllReduce ? 2 * (p - 1) : p - 1; }

TEST(RingCoflow, OneCoflowCarriesEveryStepOfEveryRing) {
  // 8 H100s on NVSwitch: one ring; a hop leaves one GPU's NVSwitch port and enters the next's.
  const ClusterSpec c = preset("nodes/hgx-h100.yaml");
  const ClusterTopology t(c);
  const CollectivePlan plan = ring_plan(t, c, CollectiveOp::kAllGather, 1000, iota(8), true);
  ASSERT_EQ(plan.phases.size(), 2u);
  const PlanPhase& ring = plan.phases[1];
  EXPECT_EQ(ring.repeat, 1);
  ASSERT_EQ(ring.flows.size(), 1u);
  // 7 steps of LL, which moves 4x its data, on 1 of NCCL's 32 channels (8,000 B fill less than
  // one channel's 32 KiB): 1/32 of the bandwidth, as 32x the bytes.
  EXPECT_DOUBLE_EQ(ring.flows[0].bytes, 7 * 1000 / 0.25 * 32);
  EXPECT_EQ(ring.flows[0].links.size(), 16u);              // 8 ports out, 8 in, each crossed once
  for (const WeightedLink& l : ring.flows[0].links) EXPECT_EQ(l.weight, 1.0);
  // One flow per hop and step: 8 flows of 128,000 B, 7 times.
  const CollectivePlan steps = ring_plan(t, c, CollectiveOp::kAllGather, 1000, iota(8), false);
  EXPECT_EQ(steps.phases[1].repeat, 7);
  ASSERT_EQ(steps.phases[1].flows.size(), 8u);
  EXPECT_DOUBLE_EQ(steps.phases[1].flows[0].bytes, 1000 / 0.25 * 32);
  // Two DGX A100 nodes: one ring per channel (8), each with 1/8 of the bytes, all in one coflow;
  // every ring crosses the network twice (into the second node and back) through NICs of its
  // own, so the coflow crosses every NIC once each way.
  const ClusterSpec two = preset("clusters/dgx-a100-2node.yaml");
  const ClusterTopology t2(two);
  const CollectivePlan across = ring_plan(t2, two, CollectiveOp::kAllGather, kKiB, iota(16), true);
  const NcclRun choice = nccl_choice(two, CollectiveOp::kAllGather, kKiB, iota(16));
  ASSERT_EQ(choice.channels, 8);
  ASSERT_EQ(across.phases[1].flows.size(), 1u);
  const FlowSpec& coflow = across.phases[1].flows[0];
  EXPECT_DOUBLE_EQ(coflow.bytes, 15.0 * kKiB / choice.efficiency / 8);
  std::map<LinkId, double> weight;
  for (const WeightedLink& l : coflow.links) weight[l.link] = l.weight;
  for (int node = 0; node < 2; ++node) {
    for (int nic = 0; nic < t2.nics_per_node(); ++nic) {
      EXPECT_EQ(weight[t2.nic_out(node, nic)], 1.0) << t2.link_name(t2.nic_out(node, nic));
      EXPECT_EQ(weight[t2.nic_in(node, nic)], 1.0) << t2.link_name(t2.nic_in(node, nic));
    }
  }
  // A GPU's NVSwitch port out carries its hop in the 7 rings where its successor is in its node.
  for (int gpu = 0; gpu < 8; ++gpu) {
    const LinkId port = t2.local_link(0, t2.local_route(gpu, (gpu + 1) % 8).front());
    EXPECT_EQ(weight[port], 7.0) << t2.link_name(port);
  }
}

TEST(RingCoflow, OnlyLatencyBoundRingsRunAsCoflows) {
  // 8 H100s: a ring's bytes alone take 7 x b' / 369 ns (b' a hop's bytes in a step, 369 B/ns an
  // NVSwitch port, crossed by one hop); the ring is a coflow when that is at most NCCL's latency.
  // LL (b' = 4b, latency 6.6 us + 7 x 0.6 us): 7 x 4 x 142,000 / 369 = 10,775 ns <= 10,800 ns,
  // 7 x 4 x 143,000 / 369 = 10,851 ns is not; Simple at 64 MiB: 1.27 ms against 32.2 us.
  const ClusterSpec c = preset("nodes/hgx-h100.yaml");
  const ClusterTopology t(c);
  for (const auto& [b, coflow] : {std::pair{std::int64_t{1000}, true}, std::pair{std::int64_t{142000}, true},
                                  std::pair{std::int64_t{143000}, false}, std::pair{64 * kMiB, false}}) {
    const NcclRun choice = nccl_choice(c, CollectiveOp::kAllGather, b, iota(8));
    ASSERT_EQ(choice.protocol, b < kMiB ? NcclProtocol::kLL : NcclProtocol::kSimple) << b;
    const PlanPhase ring = ring_plan(t, c, CollectiveOp::kAllGather, b, iota(8), true).phases[1];
    EXPECT_EQ(ring.flows.size(), coflow ? 1u : 8u) << b;
    EXPECT_EQ(ring.repeat, coflow ? 1 : 7) << b;
  }
}

TEST(RingCoflow, AloneTakesTheLatencyAndTheStepsAtTheHopRate) {
  // 8 H100s, an all-gather of 1,000 B per rank: LL, latency 6.6 us + 7 hops x 0.6 us, on one of
  // NCCL's 32 channels; each step moves 1000 x 4 x 32 = 128,000 B over NVSwitch ports of 18 x
  // 25 GB/s x 0.82 = 369 B/ns. As one coflow the 7 steps take ceil(7 x 128,000 / 369) =
  // ceil(2428.2) = 2429 ns; one flow per hop and step rounds each step up to whole ns,
  // 7 x ceil(346.9) = 2429 ns.
  const ClusterSpec c = preset("nodes/hgx-h100.yaml");
  const ClusterTopology t(c);
  EXPECT_EQ(run(t, ring_plan(t, c, CollectiveOp::kAllGather, 1000, iota(8), true)), 10800 + 2429);
  EXPECT_EQ(run(t, ring_plan(t, c, CollectiveOp::kAllGather, 1000, iota(8), false)), 10800 + 2429);
  // 369 B per rank: 47,232 B a step, 128 ns exactly: both 7 x 128 ns.
  EXPECT_EQ(run(t, ring_plan(t, c, CollectiveOp::kAllGather, 369, iota(8), true)), 10800 + 896);
  EXPECT_EQ(run(t, ring_plan(t, c, CollectiveOp::kAllGather, 369, iota(8), false)), 10800 + 896);
}

TEST(RingCoflow, AloneWithinANanosecondPerStepOfOneFlowPerHopAndStep) {
  // The slowest hop's max-min rate r is the ring's pace in both plans (no other hop's end raises
  // it: every flow on its bottleneck link has it), so one flow per hop and step takes
  // steps x ceil(b / r) and the coflow ceil(steps x b / r): never slower, by less than 1 ns a step.
  // Rings within NVSwitch nodes, over PCIe and uneven NVLinks (DGX-1), across nodes through every
  // NIC, strided groups; each protocol alone (LL, LL128, Simple).
  for (const char* file : {"nodes/hgx-h100.yaml", "nodes/dgx-1-v100.yaml", "clusters/dgx-a100-2node.yaml",
                           "clusters/h100-4x-hgx-ndr.yaml", "clusters/adira-8x-dgx-a100.yaml"}) {
    for (std::size_t protocol = 0; protocol < 3; ++protocol) {
      ClusterSpec c = preset(file);
      c.node.nccl.algorithms = {true, false};
      c.node.nccl.protocols = {protocol == 0, protocol == 1, protocol == 2};
      const ClusterTopology t(c);
      std::vector<int> strided;
      for (int r = 1; r < c.num_gpus(); r += 2) strided.push_back(r);
      int coflows = 0;
      for (const std::vector<int>& group : {iota(c.num_gpus()), strided}) {
        const int p = static_cast<int>(group.size());
        for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
          for (std::int64_t b = 64; b <= 256 * kMiB; b *= 16) {
            const CollectivePlan plan = ring_plan(t, c, op, b, group, true);
            coflows += plan.phases[1].repeat == 1 ? 1 : 0;
            const TimeNs coflow = run(t, plan);
            const TimeNs per_step = run(t, ring_plan(t, c, op, b, group, false));
            const std::string what = std::string(file) + " protocol " + std::to_string(protocol) + " " +
                                     std::string(to_string(op)) + " over " + std::to_string(p) + ", " +
                                     std::to_string(b) + " B per rank";
            EXPECT_LE(coflow, per_step) << what;
            EXPECT_LT(per_step - coflow, ring_steps(op, p)) << what;
          }
        }
      }
      EXPECT_GE(coflows, 6) << file << " protocol " << protocol;  // the small sizes are latency-bound
    }
  }
}

// Runs `plans` together from time 0 and returns when each ended.
std::vector<TimeNs> run_together(const ClusterTopology& t, const std::vector<CollectivePlan>& plans) {
  FlowSimulator sim(t);
  for (std::size_t k = 0; k < plans.size(); ++k)
    sim.start(k, std::make_shared<const CollectivePlan>(plans[k]), 0, 1.0);
  std::vector<TimeNs> end(plans.size(), kNever);
  std::vector<std::uint64_t> finished;
  while (!sim.empty()) {
    const TimeNs now = sim.next_event();
    sim.advance_to(now, finished);
    for (std::uint64_t id : finished) end[id] = now;
    finished.clear();
  }
  return end;
}

TEST(RingCoflow, SharesItsBottleneckAsOneFlowPerHop) {
  // 8 H100s: an all-gather of 1,000 B per rank (latency 10.8 us, then 7 steps of 128,000 B a hop:
  // LL on one of 32 channels) beside a transfer from GPU 0 to GPU 4 of 369 x 20,000 B, both
  // started at 0. The transfer runs alone at B = 369 B/ns through the ring's latency; then it
  // shares GPU 0's port out with hop 0 -> 1 and GPU 4's port in with hop 3 -> 4: B/2 each, so the
  // ring moves at B/2 and takes ceil(896,000 / 184.5) = 4857 ns. The transfer has lost
  // 4857 x B/2 bytes by then and ends 2428.5 ns after it would alone: at 22,428.5.
  const ClusterSpec c = preset("nodes/hgx-h100.yaml");
  const ClusterTopology t(c);
  CollectivePlan transfer;
  transfer.phases.push_back(PlanPhase{0, {pair_flow(t, 0, 4, 369.0 * 20000)}, 1});
  const std::vector<TimeNs> ends =
      run_together(t, {ring_plan(t, c, CollectiveOp::kAllGather, 1000, iota(8), true), transfer});
  EXPECT_EQ(ends[0], 10800 + 4857);
  EXPECT_NEAR(static_cast<double>(ends[1]), 22428.5, 1.0);
  // One flow per hop and step: each step ends with hops 0 -> 1 and 3 -> 4 at B/2 after
  // ceil(128,000 / 184.5) = 694 ns (the other hops end at 347 ns and leave no link the transfer
  // uses): the ring takes 7 x 694 = 4858 ns and the transfer loses 2429 x B bytes.
  const std::vector<TimeNs> per_step =
      run_together(t, {ring_plan(t, c, CollectiveOp::kAllGather, 1000, iota(8), false), transfer});
  EXPECT_EQ(per_step[0], 10800 + 4858);
  EXPECT_NEAR(static_cast<double>(per_step[1]), 22429, 1.0);
}

}  // namespace
}  // namespace moesim
