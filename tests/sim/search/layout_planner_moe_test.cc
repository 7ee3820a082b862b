// The layout planner's MoE axes (sim/search/layout_planner.h): expert parallelism, the experts'
// tensor-parallel sizes, sub-stage chunks, memory-reuse strategies and Megatron-Core's combined
// 1F1B, each enumerated under the step's own rules, and the closed-form peaks they add.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "sim/search/layout_planner.h"
#include "sim/step/step_shape.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/search/layout_planner_test_util.h"
#include "tests/sim/spec/spec_test_util.h"
#include "tests/sim/step_presets.h"

namespace moesim::search {
namespace {

using ::testing::HasSubstr;
using namespace plan_test;

// The closed form counts what MoE memory reuse restores at once (one chunk's T_DI and T_M; a
// split backward's weight pass every chunk's T_DI and activation output) on top of the kept
// activations: Qwen3-30B-A3B on 8 A100s (tp 2 with sequence parallelism, pp 2, ep 2, 8 x 4,096
// tokens). With 1f1b and s4 it is the simulated peak, within 10% above it. ZB-H1's counts the
// microbatches its deferred weight passes hold (two on the last stage, where 1F1B holds one): the
// simulated peak without a strategy, at or above it with s1 (the restores counted at once).
TEST(LayoutPlanner, ClosedFormPeakCountsTheRestoredTensors) {
  const LayoutRequest r = request("qwen3-30b-a3b", 8, 8, 4096);
  auto peaks = [&](PipelineSchedule schedule, MemoryStrategy strategy) {
    StepSpec spec = sp_step(StepLayout{8, 2, 2, 1, 2, 1}, 8, 4096);
    spec.schedule = schedule;
    spec.moe_strategy = strategy;
    const StepShape shape = derive_step_shape(r.model, r.cluster, spec);
    const auto closed = static_cast<double>(closed_form_peak_bytes(r.model, spec, shape));
    const auto simulated = static_cast<double>(simulate_training_step(r.model, r.cluster, spec).report.peak_memory_bytes);
    std::printf("%s %s: closed form %.3f GiB, simulated %.3f GiB\n", std::string(to_string(schedule)).c_str(),
                std::string(to_string(strategy)).c_str(), closed / (1 << 30), simulated / (1 << 30));
    return std::pair{closed, simulated};
  };
  const auto [closed, simulated] = peaks(PipelineSchedule::kOneFOneB, MemoryStrategy::kS4);
  EXPECT_GE(closed, simulated);
  EXPECT_LE(closed, simulated * 1.10);
  const auto [zb_closed, zb_simulated] = peaks(PipelineSchedule::kZeroBubbleH1, MemoryStrategy::kNone);
  const auto [s1_closed, s1_simulated] = peaks(PipelineSchedule::kZeroBubbleH1, MemoryStrategy::kS1);
  EXPECT_EQ(zb_closed, zb_simulated);
  EXPECT_GE(s1_closed, s1_simulated);
  EXPECT_LE(s1_closed, s1_simulated * 1.10);
}

// --strategies: the MoE layers' memory reuse tried beside none; the step's rules reject it with
// full recomputation and folded experts, and a dense model is refused.
TEST(LayoutPlanner, TriesTheRequestedMemoryReuseStrategiesOfMoeLayers) {
  LayoutRequest r = tiny_moe(8, 16);
  r.moe_chunks = {1};
  const LayoutEnumeration plain = enumerate_layouts(r);
  r.moe_strategies = {MemoryStrategy::kS4, MemoryStrategy::kNone, MemoryStrategy::kS4};
  const LayoutEnumeration asked = enumerate_layouts(r);
  EXPECT_EQ(asked.considered, 2 * plain.considered);
  std::set<std::string> none, reuse;
  bool own_shard = false;  // s4 also where each rank routes its own shard (folded or tp > 1 with SP)
  for (const LayoutCandidate& c : asked.fitting) {
    StepSpec plain_spec = c.spec;
    plain_spec.moe_strategy = MemoryStrategy::kNone;
    (c.spec.moe_strategy == MemoryStrategy::kNone ? none : reuse).insert(key(plain_spec));
    if (c.spec.moe_strategy == MemoryStrategy::kS4) {
      EXPECT_NE(c.spec.recompute, Recompute::kFull) << key(c.spec);
      own_shard |= c.spec.layout.routes_own_shard(c.spec.sequence_parallel);
    }
  }
  EXPECT_FALSE(reuse.empty());
  EXPECT_TRUE(own_shard);
  for (const std::string& k : reuse) EXPECT_TRUE(none.contains(k)) << k;  // s4 needs no more memory
  EXPECT_GT(count_of(asked, "--strategy sN restores the experts' tensors that --recompute full already recomputes: "
                            "give one of them"),
            0);
  LayoutRequest dense = tiny(8, 16);
  dense.moe_strategies = {MemoryStrategy::kS1};
  EXPECT_THROW(enumerate_layouts(dense), InputError);
}

// LayoutRequest::try_moe_ep_overlap (plan --overlap-moe-expert-parallel-comm): every MoE layout
// the combined 1F1B runs on (pp 1 or interleaved, ep > 1, no full recomputation) a second time
// with it, and no other; a dense
// model's candidates are unchanged. Its closed-form peak holds one pass more.
TEST(LayoutPlanner, TriesTheCombinedOneFOneBBesideTheMoeLayoutsItRunsOn) {
  LayoutRequest r = tiny_moe(8, 16);
  r.moe_chunks = {1};
  const LayoutEnumeration plain = enumerate_layouts(r);
  r.try_moe_ep_overlap = true;
  const LayoutEnumeration asked = enumerate_layouts(r);
  std::map<std::string, std::int64_t> plain_peak;
  std::int64_t runs_on = 0;
  for (const LayoutCandidate& c : plain.fitting) {
    plain_peak[key(c.spec)] = c.memory_estimate_bytes;
    runs_on += (c.spec.layout.pp == 1 || c.spec.layout.vpp > 1) && c.spec.layout.ep > 1 &&
               c.spec.recompute != Recompute::kFull;
  }
  EXPECT_GT(runs_on, 0);
  std::int64_t combined = 0;
  for (const LayoutCandidate& c : asked.fitting) {
    if (!c.spec.overlap_moe_ep_comm) continue;
    ++combined;
    EXPECT_TRUE(c.spec.layout.pp == 1 || c.spec.layout.vpp > 1) << key(c.spec);
    EXPECT_GT(c.spec.layout.ep, 1) << key(c.spec);
    EXPECT_NE(c.spec.recompute, Recompute::kFull) << key(c.spec);
    ASSERT_TRUE(plain_peak.contains(key(c.spec))) << key(c.spec);
    // One pass more, unless the plain schedule already holds every pass (one microbatch).
    const std::int64_t microbatches = c.spec.global_batch / (c.spec.layout.dp() * c.spec.micro_batch);
    if (c.spec.layout.pp == 1 && microbatches > 1) {
      EXPECT_GT(c.memory_estimate_bytes, plain_peak[key(c.spec)]) << key(c.spec);
    } else {
      EXPECT_GE(c.memory_estimate_bytes, plain_peak[key(c.spec)]) << key(c.spec);
    }
  }
  // Every plain layout it runs on fits with it here (a batch of 2 microbatches at most a replica).
  EXPECT_EQ(combined, runs_on);
  EXPECT_EQ(asked.fitting.size(), plain.fitting.size() + static_cast<std::size_t>(runs_on));
  // Twins only of layouts the step accepts: no rule's count grows.
  for (const RejectionCount& rej : asked.rejections)
    if (rej.reason.starts_with("does not fit")) EXPECT_GE(rej.count, count_of(plain, rej.reason));
    else EXPECT_EQ(rej.count, count_of(plain, rej.reason)) << rej.reason;
  EXPECT_NO_THROW(check_fixed_axes(r));
  r.only.pp = {2};
  r.only.vpp = {1};
  EXPECT_THAT(moesim::testing::input_error_of([&] { check_fixed_axes(r); }),
              HasSubstr("--overlap-moe-expert-parallel-comm: no candidate layout of this request runs Megatron-Core's "
                        "combined 1F1B"));
  LayoutRequest dense = tiny(8, 16);
  dense.try_moe_ep_overlap = true;
  EXPECT_EQ(enumerate_layouts(dense).considered, enumerate_layouts(tiny(8, 16)).considered);
}

// The combined 1F1B's closed-form peak (one pass more than its schedule's) bounds the simulated
// peak, which an interleaved pair's backward keeps below it by freeing while its forward allocates:
// the planner may count as not fitting a combined layout that the simulation would fit.
TEST(LayoutPlanner, ClosedFormPeakOfTheCombinedOneFOneBCoversTheSimulatedPeak) {
  LayoutRequest r = request("qwen3-30b-a3b", 16, 32, 1024);
  r.cluster = moesim::testing::cluster_preset("dgx-h100-ndr", 16);
  for (const StepLayout layout : {StepLayout{16, 2, 2, 2, 4, 1}, StepLayout{16, 2, 1, 1, 4, 1}}) {
    double closed[2] = {0, 0}, simulated[2] = {0, 0};
    for (const bool overlap : {false, true}) {
      StepSpec spec = sp_step(layout, 32, 1024);
      spec.overlap_moe_ep_comm = overlap;
      const StepShape shape = derive_step_shape(r.model, r.cluster, spec);
      closed[overlap] = static_cast<double>(closed_form_peak_bytes(r.model, spec, shape));
      simulated[overlap] = static_cast<double>(simulate_training_step(r.model, r.cluster, spec).report.peak_memory_bytes);
      std::printf("pp %d vpp %d%s: closed form %.4f GiB, simulated %.4f GiB\n", layout.pp, layout.vpp,
                  overlap ? " combined" : "", closed[overlap] / (1 << 30), simulated[overlap] / (1 << 30));
    }
    // Without the overlap the closed form is the simulated peak (to 8 KiB at pp 2); with it, the
    // bound is loose by up to the extra pass (0.86 GiB of a 1.03 GiB pass at pp 2 vpp 2, 4.3 of
    // 4.4 GiB at pp 1): the simulated pair peaks one to two layers above the plain schedule.
    EXPECT_NEAR(closed[0], simulated[0], 1 << 20) << "pp " << layout.pp;
    EXPECT_GE(closed[1], simulated[1]) << "pp " << layout.pp;
    EXPECT_GT(simulated[1], simulated[0]) << "pp " << layout.pp;
  }
}

TEST(LayoutPlanner, EnumeratesExpertParallelDegreesOfMoeModels) {
  LayoutRequest r = request("gpt-1.7b", 16, 64, 1024);
  r.model = preset("qwen3-30b-a3b");
  const LayoutEnumeration e = enumerate_layouts(r);
  bool expert_parallel = false;
  for (const LayoutCandidate& c : e.fitting) {
    expert_parallel |= c.spec.layout.ep > 1;
    EXPECT_NO_THROW(derive_step_shape(r.model, r.cluster, c.spec));
  }
  EXPECT_TRUE(expert_parallel);
  EXPECT_GT(count_of(e, "--ep N does not divide --cp x data-parallel size = N (the expert-parallel group lies inside "
                        "them)"),
            0);
}

TEST(LayoutPlanner, EnumeratesTheExpertsTensorParallelSizesAndSubStageChunksOfMoeModels) {
  const LayoutRequest r = tiny_moe(8, 8);
  const LayoutEnumeration e = enumerate_layouts(r);
  std::set<int> etps, chunks;
  std::set<std::string> distinct;
  bool folded = false;
  for (const LayoutCandidate& c : e.fitting) {
    const StepLayout& l = c.spec.layout;
    EXPECT_NO_THROW(derive_step_shape(r.model, r.cluster, c.spec));
    EXPECT_NE(l.etp, l.tp) << "etp = tp is written 0 (the unfolded layout), as --etp's default";
    folded |= l.folded();
    etps.insert(l.expert_tp());
    chunks.insert(c.spec.moe_chunks);
    distinct.insert(key(c.spec));
  }
  EXPECT_TRUE(folded);
  EXPECT_EQ(etps, (std::set<int>{1, 2, 4, 8}));
  EXPECT_EQ(chunks, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(distinct.size(), e.fitting.size()) << "a layout enumerated twice";
}

TEST(LayoutPlanner, CountsTheCandidatesOfASmallMoeModelByHand) {
  // 8 GPUs of one node, 4 layers, a batch of 1 sequence. tp x cp x pp (x vpp), pp <= 4 layers:
  //   tp 1: cp 1: pp 1, 2 (vpp 1, 2), 4; cp 2: the same 4; cp 4: pp 1, 2 (vpp 1, 2); cp 8: pp 1   12
  //   tp 2: cp 1: pp 1, 2 (vpp 1, 2), 4; cp 2: pp 1, 2 (vpp 1, 2); cp 4: pp 1                      8
  //   tp 4: cp 1: pp 1, 2 (vpp 1, 2); cp 2: pp 1                                                   4
  //   tp 8: pp 1                                                                                   1
  // 25 layouts, each with micro-batch 1 (the per-replica batch is at most 1), recompute none and
  // full, ZeRO 0 and 1, except ZeRO 1 where cp x dp = 1 (tp 2 pp 4, tp 4 pp 2 vpp 1 and 2, tp 8):
  // 25 x 4 - 4 x 2 = 92 for the dense model. The MoE model adds ep 1, 2, 4 (the divisors of its 4
  // experts) x etp 1, 2, 4, 8 (tp and the three others) x chunks 1, 2, 4: 92 x 36 = 3,312.
  EXPECT_EQ(enumerate_layouts(tiny(8, 1)).considered, 92);
  LayoutRequest moe = tiny_moe(8, 1);
  EXPECT_EQ(enumerate_layouts(moe).considered, 92 * 3 * 4 * 3);
  moe.moe_chunks = {4, 1, 2, 2};  // each count once, in any order
  EXPECT_EQ(enumerate_layouts(moe).considered, 92 * 3 * 4 * 3);
  moe.moe_chunks = {1};
  EXPECT_EQ(enumerate_layouts(moe).considered, 92 * 3 * 4);
}

TEST(LayoutPlanner, RejectsIllegalExpertTensorParallelSizesUnderTheStepsOwnRules) {
  // The etp x ep rule, counted by hand over the 25 layouts above (batch 1: 4 batch variants, 2
  // where cp x dp = 1) and the folded pairs (etp != tp, ep) whose etp x ep does not divide a
  // stage's S = 8 / pp ranks: S = 8: (4, 4), (8, 2), (8, 4); S = 4: (2, 4), (4, 2), (4, 4), (8, 1),
  // (8, 2), (8, 4); S = 2: those and (1, 4), (2, 2), (4, 1), less the pairs with etp = tp.
  //   tp 1: 4 layouts of S 8 x 4 x 3 pairs + 6 of S 4 x 4 x 6 + 2 of S 2 x 4 x 8           = 256
  //   tp 2: 3 of S 8 x 4 x 3 + 4 of S 4 x 4 x 5 + 1 of S 2 (cp x dp = 1) x 2 x 7             = 130
  //   tp 4: 2 of S 8 x 4 x 2 + 2 of S 4 (cp x dp = 1) x 2 x 4                                =  32
  //   tp 8: 1 of S 8 (cp x dp = 1) x 2 x 1                                                   =   2
  // 420, for each of the 3 chunk counts: 1,260.
  const LayoutRequest r = tiny_moe(8, 1);
  const LayoutEnumeration e = enumerate_layouts(r);
  EXPECT_EQ(count_of(e, "--etp x --ep = N does not divide the N ranks of a pipeline stage (--tp x --cp x "
                        "data-parallel size; the experts' layout etp x ep x expert data-parallel fills them)"),
            1260);
  // Experts 1,028 wide (4 x 257): etp 8 does not divide their columns. Every folded etp 8 (the
  // 24 layouts with tp != 8: 92 - 2 batch variants) x 3 ep x 3 chunks: 810.
  LayoutRequest narrow = r;
  narrow.model.d_ffn = 1028;
  const LayoutEnumeration n = enumerate_layouts(narrow);
  EXPECT_EQ(count_of(n, "--etp N does not divide the experts' d_ffn N of Tiny-MoE (their columns are split over the "
                        "etp ranks)"),
            810);
  for (const LayoutCandidate& c : n.fitting) EXPECT_NE(c.spec.layout.expert_tp(), 8);
}

}  // namespace
}  // namespace moesim::search
