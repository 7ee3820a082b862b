// The host's launches in the whole step (--host-launch-us, sim/engine/host_issue.h): which tasks
// the host reads, one launch per task and per local expert of a grouped GEMM, and the bounds a
// host-issued step keeps. Qwen3-30B-A3B on 16 H100s: tp 2, pp 2, ep 4 (32 local experts), two
// microbatches of one 512-token sequence per pipeline (testing::small_moe_step).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

StepSpec qwen_step(std::optional<std::int64_t> launch_ns) {
  StepSpec s = testing::small_moe_step();
  s.host_launch_ns = launch_ns;
  return s;
}

SimulatedStep simulate(const StepSpec& s) {
  return simulate_training_step(testing::model_preset("qwen3-30b-a3b"), testing::cluster_preset("dgx-h100-ndr", 16), s);
}

TEST(HostLaunchStep, TheHostReadsEachLayersSplitSizesAndTheGradientStatistics) {
  const SimulatedStep sim = simulate(qwen_step(std::nullopt));
  const TaskGraph& g = sim.graph.graph;
  int splits = 0, scalars = 0;
  for (TaskIndex i : sim.graph.launch_notes.host_reads) {
    const Task& t = g.task(i);
    if (t.id.ends_with(".splits.d2h3")) {
      EXPECT_EQ(t.op, Op::kCopyD2H);
      ++splits;
    } else {
      EXPECT_TRUE(t.id.starts_with("optimizer.") && t.id.ends_with(".allreduce")) << t.id;
      ++scalars;
    }
  }
  // 48 MoE layers x 2 microbatches, each forward's last copy; the gradient norm's all-reduce (bf16: no loss scale, no found_inf).
  EXPECT_EQ(splits, 48 * 2);
  EXPECT_EQ(scalars, 1);
  // Launched once per local expert: the routed experts' six GEMMs (fc1 and fc2 forward, their
  // input and weight gradients) of every layer and microbatch, and nothing else (attention's
  // batched GEMMs are one kernel each).
  for (TaskIndex i : sim.graph.launch_notes.grouped_gemms) {
    EXPECT_NE(g.task(i).id.find(".experts.fc"), std::string::npos) << g.task(i).id;
    EXPECT_EQ(std::get<GemmWork>(g.task(i).work).batch, 32) << g.task(i).id;
  }
  EXPECT_EQ(sim.graph.launch_notes.grouped_gemms.size(), 48u * 2 * 6);
}

TEST(HostLaunchStep, FreeLaunchesCostOnlyTheHostsWaits) {
  const SimulatedStep without = simulate(qwen_step(std::nullopt));
  const SimulatedStep free = simulate(qwen_step(0));
  // The host waits for each split-size copy before it issues what follows, which the GPU alone
  // would have overlapped with it.
  EXPECT_GE(free.report.step_ns, without.report.step_ns);
  EXPECT_LT(free.report.step_ns, without.report.step_ns * 11 / 10);
}

TEST(HostLaunchStep, ASlowerHostNeverMakesTheStepFasterAndAVerySlowOneSetsItsPace) {
  TimeNs previous = simulate(qwen_step(0)).report.step_ns;
  for (std::int64_t us : {5, 20, 80}) {
    const TimeNs step = simulate(qwen_step(us * 1000)).report.step_ns;
    EXPECT_GE(step, previous) << us;
    previous = step;
  }
  // Host-bound: each stage's rank issues every launch one after the other, so the step is at
  // least its launches' sum (grouped GEMMs: one launch per local expert; transfers are not issued).
  constexpr std::int64_t kLaunch = 500'000;
  const SimulatedStep slow = simulate(qwen_step(kLaunch));
  const TaskGraph& g = slow.graph.graph;
  const auto& grouped = slow.graph.launch_notes.grouped_gemms;
  for (int stage = 0; stage < 2; ++stage) {
    const int rank = slow.graph.shape.stage_rank(stage);
    std::int64_t launches = 0;
    for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
      const Task& t = g.task(i);
      const std::vector<int> ranks = g.ranks_of(i);
      if (t.op == Op::kSendRecv || std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) continue;
      const bool per_expert = std::find(grouped.begin(), grouped.end(), i) != grouped.end();
      launches += per_expert ? std::get<GemmWork>(t.work).batch : 1;
    }
    EXPECT_GE(slow.report.step_ns, launches * kLaunch) << stage;
    EXPECT_GT(launches, 48 / 2 * 2 * 32 * 6) << stage;  // at least the experts' GEMMs: 32 x 6 a layer and microbatch
  }
}

TEST(HostLaunchStep, IdleTimeWaitingForLaunchesIsTheHostsNotABubble) {
  // Without interference: with it, kernels that the host's pace lines up differently against the
  // collectives run at other speeds (the H100's GEMMs at 0.52-0.79 beside communication, by size), and the
  // GPU's busy time moves with them.
  ClusterSpec cluster = testing::cluster_preset("dgx-h100-ndr", 16);
  for (auto& row : cluster.node.interference.factors) row.fill(1.0);
  cluster.node.interference.gemm_with_communication.clear();
  const auto simulate_alone = [&](const StepSpec& s) {
    return simulate_training_step(testing::model_preset("qwen3-30b-a3b"), cluster, s);
  };
  const SimulatedStep without = simulate_alone(qwen_step(std::nullopt));
  const SimulatedStep slow = simulate_alone(qwen_step(200'000));
  for (std::size_t s = 0; s < 2; ++s) {
    const StageReport& a = without.report.stages[s];
    const StageReport& b = slow.report.stages[s];
    EXPECT_EQ(a.host_wait_ns, 0) << s;
    EXPECT_GT(b.host_wait_ns, 0) << s;
    // The GPU's work is the same (its union within 1%: kernels overlap differently); what the
    // host adds is idle time, host wait where a task had its inputs but not its launch, bubble
    // where it waited for the other stage's late activations.
    EXPECT_NEAR(static_cast<double>(b.compute_busy_ns), static_cast<double>(a.compute_busy_ns), 0.01 * a.compute_busy_ns) << s;
    EXPECT_LE(b.bubble_ns + b.host_wait_ns + b.compute_busy_ns, slow.report.step_ns) << s;
    EXPECT_GT(b.bubble_ns + b.host_wait_ns, a.bubble_ns) << s;
  }
}

TEST(HostLaunchStep, ZeroThreesWeightGathersAreIssuedBeforeTheLayerThatWaitsForThem) {
  // ZeRO-3's gathers precede their layer's first task, which precedes the split sizes' host read:
  // issued in that order the step runs, and no slower than the GPU alone.
  StepSpec s = qwen_step(10'000);
  s.zero_stage = 3;
  const SimulatedStep sim = simulate(s);
  const TaskGraph& g = sim.graph.graph;
  const auto gather = g.find("mb0.L0.fwd.weights.allgather", -1);
  const auto norm = g.find("mb0.L0.fwd.ln1", 0);
  ASSERT_TRUE(gather && norm);
  EXPECT_LT(*gather, *norm);
  s.host_launch_ns.reset();
  EXPECT_GE(sim.report.step_ns, simulate(s).report.step_ns);
}

TEST(HostLaunchStep, WithNoGroupToReduceOverTheHostReadsTheNormKernel) {
  // tp 1, pp 1, ZeRO 0 on 8 GPUs: the statistics reduce over the model-parallel group, one rank,
  // so there is no all-reduce, but the host still reads the norm.
  StepSpec s;
  s.layout.gpus = 8;
  s.global_batch = 8;
  s.seq = 256;
  s.host_launch_ns = 10'000;
  const SimulatedStep sim =
      simulate_training_step(testing::model_preset("gpt-1.7b"), testing::a100_cluster(8), s);
  std::vector<std::string> reads;
  for (TaskIndex i : sim.graph.launch_notes.host_reads) reads.push_back(sim.graph.graph.task(i).id);
  // fp16: the found-inf check after unscaling, then the norm.
  EXPECT_EQ(reads, (std::vector<std::string>{"stage0.bwd.unscale", "stage0.bwd.grad_norm"}));
}

}  // namespace
}  // namespace moesim
