// Simulated steps under DeepSpeed-TED's tensor x expert x data layout (reference section 5) on the
// Adira preset (8 x DGX A100: NVSwitch 300 GB/s x 0.77 = 231 GB/s and 3 us inside a node; one HDR
// NIC per GPU, 25 GB/s x 0.94 = 23.5 GB/s and 5 us between nodes).
//
// Golden durations (alpha-beta model, each task alone), MoE-GPT-S 64E (M = 768, fp32), B = 4096,
// n = 4: C = floor(4096 / 64) = 64, a chunk's dispatch tensor E * C / n = 1024 rows x 768 x 4 B =
// 3145728 B. With tp = 8 the expert-parallel group is one GPU per node (ranks 0, 8, ..., 56):
//   dispatch all-to-all with dropping, per peer E_l * (C/n) / tp * M * 4 = 8 * 16 / 8 * 3072 =
//     49152 B to 7 peers in other nodes: 5 us + 7 * 49152 / 23.5e9 = 19641.02 ns;
//   expert parallelism over all 64 GPUs sends the same 49152 B per peer but to 56 peers in other
//     nodes: 5 us + 56 * 49152 / 23.5e9 = 122128.17 ns -- TED's 8x smaller inter-node volume;
//   the tensor-parallel all-gather (ring of 8 in a node, S = 3145728):
//     7 * 3 us + 7/8 * S / 231e9 = 21000 + 11915.64 = 32915.64 ns;
//   the tensor-parallel all-reduce: 14 * 3 us + 2 * 7/8 * S / 231e9 = 42000 + 23831.27 = 65831.27 ns.
// Gradient all-reduces (--ep 8: tp 1 x ep 8 x dp 8, experts in fp32): 8 local experts of
// 2 x 768 x 3072 parameters = 37748736 x 4 B = 150994944 B over the 8 replicas (one GPU per node):
//   14 * 5 us + 2 * 7/8 * 150994944 / 23.5e9 = 70000 + 11244304.34 = 11314304.34 ns;
// the gate, 64 x 768 x 4 B = 196608 B over the 64 GPUs:
//   126 * 5 us + 2 * 63/64 * 196608 / 23.5e9 = 630000 + 16471.15 = 646471.15 ns.
#include <gtest/gtest.h>

#include <string>

#include "sim/driver/simulation.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

ClusterSpec adira() { return load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml"); }
ModelSpec gpt_s() { return load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml"); }

RunSpec run_with(int tp, int ep = 0, bool dtd = true) {
  RunSpec r;
  r.tokens_per_gpu = 4096;
  r.num_chunks = 4;
  r.tp_size = tp;
  r.ep_size = ep;
  r.drop_duplicate_tokens = dtd;
  r.network = NetworkModel::kAlphaBeta;
  return r;
}

double isolated_ns(const TaskGraph& g, const std::vector<TimeNs>& durations, const std::string& id) {
  auto i = g.find(id, 0);
  if (!i) i = g.find(id, -1);
  EXPECT_TRUE(i.has_value()) << id;
  return i ? static_cast<double>(durations[*i]) : -1;
}

// The collectives' durations in the alpha-beta model, as NCCL runs them (sim/net/nccl_model.h):
// pinned so that a change to the network model shows here.
TEST(TedStep, GoldenCollectiveDurations) {
  const ClusterSpec c = adira();
  const TaskGraph ted = build_moe_graph(gpt_s(), c, run_with(8));
  const std::vector<TimeNs> d = isolated_durations(ted, c, NetworkChoice{NetworkModel::kAlphaBeta});
  EXPECT_NEAR(isolated_ns(ted, d, "L0.fwd.dispatch.tp0.c0"), 58041, 1.0);
  EXPECT_NEAR(isolated_ns(ted, d, "L0.bwd.combine.tp0.c3"), 58041, 1.0);
  EXPECT_NEAR(isolated_ns(ted, d, "L0.fwd.dispatch.allgather.ep0.c0"), 40252, 1.0);
  EXPECT_NEAR(isolated_ns(ted, d, "L0.fwd.fc2.allreduce.ep0.c0"), 66504, 1.0);
  EXPECT_NEAR(isolated_ns(ted, d, "L0.bwd.fc1.allreduce.ep0.c2"), 66504, 1.0);

  const TaskGraph ep = build_moe_graph(gpt_s(), c, run_with(1));
  const std::vector<TimeNs> e = isolated_durations(ep, c, NetworkChoice{NetworkModel::kAlphaBeta});
  EXPECT_NEAR(isolated_ns(ep, e, "L0.fwd.dispatch.c0"), 440528, 1.0);
}

TEST(TedStep, GoldenGradientAllReduces) {
  const ClusterSpec c = adira();
  RunSpec r = run_with(1, 8);
  r.grad_sync = true;
  const TaskGraph g = build_moe_graph(gpt_s(), c, r);
  EXPECT_EQ(g.world_size(), 64);
  const std::vector<TimeNs> d = isolated_durations(g, c, NetworkChoice{NetworkModel::kAlphaBeta});
  EXPECT_NEAR(isolated_ns(g, d, "L0.bwd.grad.experts.allreduce.ep0"), 11588704, 1.0);
  EXPECT_NEAR(isolated_ns(g, d, "L0.bwd.grad.dense.allreduce"), 83839, 1.0);
  // The step cannot end before the gradients are synchronised, and it ends with them.
  const SimulationResult s = simulate_step(gpt_s(), c, r);
  const TaskIndex last = *s.graph.find("L0.bwd.grad.dense.allreduce", -1);
  EXPECT_EQ(s.trace.records[last].end_ns, s.metrics.step_ns);
  const TaskIndex experts = *s.graph.find("L0.bwd.grad.experts.allreduce.ep0", -1);
  const TaskIndex wgrad = *s.graph.find("L0.bwd.fc1.wgrad.c3", 0);
  EXPECT_GE(s.trace.records[experts].start_ns, s.trace.records[wgrad].end_ns);
  // Overlapped with the rest of the backward: it starts before the layer's gate gradients.
  EXPECT_LT(s.trace.records[experts].start_ns, s.trace.records[*s.graph.find("L0.bwd.gate.wgrad", 0)].end_ns);
  EXPECT_GT(s.metrics.stages.at("bwd.grad_sync").busy_ns, 11588704 + 83839 - 1);
}

// Duplicate token dropping moves 1/tp of the all-to-all bytes and adds intra-node all-gathers:
// on Adira, where the all-to-alls cross nodes, the step gets faster with it, in both network models.
TEST(TedStep, DuplicateTokenDroppingShortensTheStep) {
  for (NetworkModel net : {NetworkModel::kAlphaBeta, NetworkModel::kFlow}) {
    RunSpec with = run_with(8);
    with.network = net;
    RunSpec without = with;
    without.drop_duplicate_tokens = false;
    const SimulationResult a = simulate_step(gpt_s(), adira(), with);
    const SimulationResult b = simulate_step(gpt_s(), adira(), without);
    EXPECT_LT(a.metrics.step_ns, b.metrics.step_ns) << to_string(net);
    EXPECT_TRUE(a.metrics.stages.count("fwd.tp_gather"));
    EXPECT_FALSE(b.metrics.stages.count("fwd.tp_gather"));
  }
}

// Balanced routing makes every rank of every group symmetric: under alpha-beta, one rank gives the
// same step as all of them, with and without the gradient all-reduces.
TEST(TedStep, RepresentativeRankEqualsEveryRankUnderAlphaBeta) {
  const ClusterSpec c = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  const ModelSpec m = load_model_spec(kRoot + "/models/moe-gpt-s-16e.yaml");
  for (bool grad : {false, true}) {
    RunSpec r = run_with(2, 4);
    r.tokens_per_gpu = 2048;
    r.grad_sync = grad;
    r.strategy = MemoryStrategy::kS2;
    BuildOptions all;
    all.representative_rank = false;
    all.all_replicas = true;
    const SimulationResult one = simulate_step(m, c, r);
    const SimulationResult every = simulate_step(m, c, r, all);
    EXPECT_EQ(one.graph.simulated_ranks().size(), 1u);
    EXPECT_EQ(every.graph.simulated_ranks().size(), grad ? 16u : 8u);
    EXPECT_EQ(one.metrics.step_ns, every.metrics.step_ns) << "grad_sync " << grad;
    EXPECT_EQ(one.memory.front().peak_device_bytes, every.memory.front().peak_device_bytes);
  }
}

// Valor: 4 nodes of 4 V100s sharing one NIC. With --ep 4 the experts have 4 replicas (one per
// node), so each node's 4 GPUs run 4 gradient rings through the one NIC at once: the flow model
// must see all of them, so the default (the first replica) equals every rank simulated.
TEST(TedStep, GradientRingsOfTheOtherRanksShareTheNic) {
  const ClusterSpec c = load_hardware_spec(kRoot + "/hardware/clusters/valor-4x-v100.yaml");
  ModelSpec m = load_model_spec(kRoot + "/models/moe-gpt-s-16e.yaml");
  m.dtype = DType::kFp16;  // V100: no tf32
  m.gemm_dtype = DType::kFp16;
  RunSpec r = run_with(1, 4);
  r.tokens_per_gpu = 2048;
  r.network = NetworkModel::kFlow;
  r.grad_sync = true;
  EXPECT_FALSE(build_options_for(c, r).representative_rank);
  BuildOptions all;
  all.representative_rank = false;
  all.all_replicas = true;
  const SimulationResult replica = simulate_step(m, c, r);
  const SimulationResult every = simulate_step(m, c, r, all);
  EXPECT_EQ(replica.graph.simulated_ranks().size(), 4u);
  EXPECT_EQ(every.graph.simulated_ranks().size(), 16u);
  EXPECT_EQ(replica.metrics.step_ns, every.metrics.step_ns);
  // One rank alone would see its ring with the NIC to itself: faster than the truth.
  BuildOptions one;
  one.representative_rank = true;
  TaskGraph g = build_moe_graph(m, c, r, one);
  EXPECT_LT(simulate_graph(g, c, NetworkChoice{NetworkModel::kFlow}).trace.makespan_ns(), replica.metrics.step_ns);
}

TEST(TedStep, FlowModelSimulatesTheWholeReplicaWithTensorParallelism) {
  const ClusterSpec c = adira();
  RunSpec r = run_with(2);
  r.network = NetworkModel::kFlow;
  EXPECT_FALSE(build_options_for(c, r).representative_rank);
  r.network = NetworkModel::kAlphaBeta;
  EXPECT_TRUE(build_options_for(c, r).representative_rank);
  r.tp_size = 1;
  r.network = NetworkModel::kFlow;
  EXPECT_TRUE(build_options_for(c, r).representative_rank);
  r.tp_size = 2;
  r.network = NetworkModel::kAuto;  // Adira has a topology and a fabric: flow
  const SimulationResult s = simulate_step(gpt_s(), c, r);
  EXPECT_EQ(s.graph.simulated_ranks().size(), 64u);
}

// The t ranks of a tensor-parallel group hold the same B tokens, so the cluster's global batch is
// G / t x B: at one global batch (B scaled with tp) every layout of the 64 GPUs gives a rank the
// same expert work (E x 2HM / (tp x ep) parameters over tp x B tokens); what TED changes is the
// communication.
TEST(TedStep, LayoutsAtOneGlobalBatchKeepTheExpertWork) {
  const ClusterSpec c = adira();
  std::int64_t fc1_flops = -1;
  for (int tp : {1, 2, 4, 8}) {
    RunSpec r = run_with(tp);
    r.tokens_per_gpu = 4096 * tp;
    const SimulationResult s = simulate_step(gpt_s(), c, r);
    std::int64_t flops = 0;
    for (TaskIndex i = 0; i < s.graph.num_tasks(); ++i) {
      const Task& t = s.graph.task(i);
      if (t.rank == 0 && t.stage == "fc1" && t.pass == Pass::kForward) flops += std::get<GemmWork>(t.work).flops();
    }
    if (fc1_flops < 0) fc1_flops = flops;
    EXPECT_EQ(flops, fc1_flops) << "tp " << tp;
  }
}

}  // namespace
}  // namespace moesim
