// The layout planner of the whole step (sim/search/layout_planner.h): every layout it keeps is
// legal and fits by the closed form, every other candidate is counted under one reason, the
// ranking is the simulated one, and the token-rate search stops at the first node count that
// reaches its target.
#include "sim/search/layout_planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>
#include <string>

#include "sim/memory/activations.h"
#include "sim/spec/loader.h"
#include "tests/sim/spec/spec_test_util.h"
#include "tests/sim/search/layout_planner_test_util.h"
#include "tests/sim/step_presets.h"

namespace moesim::search {
namespace {

using ::testing::HasSubstr;
using namespace plan_test;

TEST(LayoutPlanner, KeepsOnlyLegalLayoutsThatFitAndCountsEveryOtherCandidate) {
  const LayoutRequest r = request("gpt-1.7b", 16, 24, 1024);
  const LayoutEnumeration e = enumerate_layouts(r);
  ASSERT_FALSE(e.fitting.empty());
  std::int64_t rejected = 0;
  for (const RejectionCount& rej : e.rejections) rejected += rej.count;
  EXPECT_EQ(e.considered, static_cast<std::int64_t>(e.fitting.size()) + rejected);
  const std::int64_t usable = r.cluster.node.gpu.hbm_capacity_bytes - kStepMemoryReserve;
  std::set<std::string> distinct;
  for (const LayoutCandidate& c : e.fitting) {
    StepShape shape;
    ASSERT_NO_THROW(shape = derive_step_shape(r.model, r.cluster, c.spec));
    EXPECT_EQ(c.memory_estimate_bytes, closed_form_peak_bytes(r.model, c.spec, shape));
    EXPECT_LE(c.memory_estimate_bytes, usable);
    EXPECT_EQ(c.spec.sequence_parallel, c.spec.layout.tp > 1);
    EXPECT_EQ(c.spec.layout.ep, 1);
    EXPECT_EQ(c.spec.layout.etp, 0) << "a dense model's layouts keep etp = tp";
    EXPECT_EQ(c.spec.moe_chunks, 1);
    distinct.insert(key(c.spec));
  }
  EXPECT_EQ(distinct.size(), e.fitting.size()) << "a layout enumerated twice";
  // 24 sequences over 16 GPUs: tp 1 x pp 1 gives 16 replicas, which do not divide the batch; pp 16
  // does not divide the 24 layers; 6 microbatches of an interleaved pipeline of 4 stages is not
  // a whole number of groups.
  EXPECT_GT(count_of(e, "--global-batch N is not divisible by --micro-batch x data-parallel size = N x N"), 0);
  EXPECT_GT(count_of(e, "--pp x --vpp = N does not divide the N layers of GPT-1.7B (give the layers of each part with "
                        "--part-layers)"),
            0);
  bool interleaved_rule = false;
  for (const RejectionCount& rej : e.rejections) interleaved_rule |= rej.reason.starts_with("--schedule interleaved");
  EXPECT_TRUE(interleaved_rule);
}

TEST(LayoutPlanner, CountsLayoutsWhoseClosedFormPeakExceedsTheGpu) {
  // GPT-22B's model states alone (22e9 x 16 bytes) need several GPUs of a node: tp 1 x pp 1 cannot fit.
  const LayoutRequest r = request("gpt-22b", 8, 8, 2048);
  const LayoutEnumeration e = enumerate_layouts(r);
  EXPECT_GT(count_of(e, "does not fit: closed-form peak (model states + stage activations) above the GPU's memory "
                        "less the 2 GiB reserve"),
            0);
  for (const LayoutCandidate& c : e.fitting) EXPECT_GT(c.spec.layout.tp * c.spec.layout.pp, 1);
}

// ZeRO stages: 0 and 1 by default, those the request names otherwise (plan --zero-stages), and no
// sharding where the data-parallel group (cp x dp) has one rank.
TEST(LayoutPlanner, TriesTheRequestedZeroStagesWhereThereIsAGroupToShardOver) {
  LayoutRequest r = tiny(8, 8);
  // Where the data-parallel group has one rank, only the smallest requested stage (all are ZeRO 0).
  auto stages_of = [](const LayoutEnumeration& e, int smallest) {
    std::set<int> out;
    for (const LayoutCandidate& c : e.fitting) {
      out.insert(c.spec.zero_stage);
      if (c.spec.layout.cp * c.spec.layout.dp() == 1) {
        EXPECT_EQ(c.spec.zero_stage, smallest) << key(c.spec);
      }
    }
    return out;
  };
  const LayoutEnumeration defaults = enumerate_layouts(r);
  EXPECT_EQ(stages_of(defaults, 0), (std::set<int>{0, 1}));
  r.zero_stages = {3, 0, 2, 3};
  EXPECT_EQ(zero_stages(r), (std::vector<int>{0, 2, 3}));
  const LayoutEnumeration asked = enumerate_layouts(r);
  EXPECT_EQ(stages_of(asked, 0), (std::set<int>{0, 2, 3}));
  // The ZeRO 0 layouts are the same; every other is one of them sharded.
  std::set<std::string> zero0_defaults, zero0_asked, layouts_asked;
  for (const LayoutCandidate& c : defaults.fitting)
    if (c.spec.zero_stage == 0) zero0_defaults.insert(key(c.spec));
  for (const LayoutCandidate& c : asked.fitting) {
    if (c.spec.zero_stage == 0) zero0_asked.insert(key(c.spec));
    StepSpec unsharded = c.spec;
    unsharded.zero_stage = 0;
    layouts_asked.insert(key(unsharded));
  }
  EXPECT_EQ(zero0_asked, zero0_defaults);
  EXPECT_EQ(layouts_asked, zero0_defaults);
  // Without 0 a layout of one data-parallel rank is still tried, once, as the smallest stage.
  r.zero_stages = {3, 2};
  const LayoutEnumeration no_zero = enumerate_layouts(r);
  EXPECT_EQ(stages_of(no_zero, 2), (std::set<int>{2, 3}));
  std::set<std::string> layouts_no_zero;
  for (const LayoutCandidate& c : no_zero.fitting) {
    StepSpec unsharded = c.spec;
    unsharded.zero_stage = 0;
    layouts_no_zero.insert(key(unsharded));
  }
  EXPECT_EQ(layouts_no_zero, zero0_defaults);
}

// The closed form adds ZeRO 2-3's transient whole tensors (two layers' fp32 gradients, the ends'
// gradients; with 3 two layers' gathered weights) to the model states and activations. On GPT-1.7B
// (tp 2, pp 2, 64 sequences of 1,024) it stays within 10% of the simulated peak, above it.
TEST(LayoutPlanner, ClosedFormPeakCoversZeroTwoAndThreesWholeTensors) {
  const LayoutRequest r = request("gpt-1.7b", 16, 64, 1024);
  for (int zero : {1, 2, 3}) {
    SCOPED_TRACE("ZeRO " + std::to_string(zero));
    StepSpec spec = sp_step(StepLayout{16, 2, 2, 1, 1, 1}, 64, 1024);
    spec.zero_stage = zero;
    const StepShape shape = derive_step_shape(r.model, r.cluster, spec);
    const auto closed = static_cast<double>(closed_form_peak_bytes(r.model, spec, shape));
    const auto simulated = static_cast<double>(simulate_training_step(r.model, r.cluster, spec).report.peak_memory_bytes);
    std::printf("ZeRO %d: closed form %.3f GiB, simulated %.3f GiB\n", zero, closed / (1 << 30), simulated / (1 << 30));
    EXPECT_GE(closed, simulated * 0.99);
    EXPECT_LE(closed, simulated * 1.10);
  }
}

// --schedules: each listed schedule with vpp 1 and pp > 1, interleaved only if listed, pp 1 once
// (no pipeline); split backward passes are tried with recomputation too.
TEST(LayoutPlanner, TriesTheRequestedPipelineSchedules) {
  LayoutRequest r = tiny(8, 16);
  r.schedules = {PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kOneFOneB, PipelineSchedule::kDualPipe,
                 PipelineSchedule::kGpipe};
  const LayoutEnumeration e = enumerate_layouts(r);
  std::set<PipelineSchedule> seen;
  bool split_with_recompute = false;
  for (const LayoutCandidate& c : e.fitting) {
    EXPECT_EQ(c.spec.layout.vpp, 1) << key(c.spec);  // interleaved not listed
    if (c.spec.layout.pp == 1) {
      EXPECT_FALSE(c.spec.schedule.has_value()) << key(c.spec);
      continue;
    }
    ASSERT_TRUE(c.spec.schedule.has_value()) << key(c.spec);
    seen.insert(*c.spec.schedule);
    if (*c.spec.schedule == PipelineSchedule::kZeroBubbleH1 || *c.spec.schedule == PipelineSchedule::kDualPipe)
      split_with_recompute = split_with_recompute || c.spec.recompute != Recompute::kNone;
  }
  EXPECT_EQ(seen, (std::set<PipelineSchedule>{PipelineSchedule::kOneFOneB, PipelineSchedule::kGpipe,
                                              PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipe}));
  EXPECT_TRUE(split_with_recompute);
  const LayoutPlan plan = plan_layouts(r);
  ASSERT_FALSE(plan.simulated.empty());
  for (const PlannedLayout& p : plan.simulated) {
    if (p.candidate.spec.effective_schedule() != PipelineSchedule::kZeroBubbleH1) continue;
    EXPECT_TRUE(p.estimate.exact);
    EXPECT_EQ(p.estimate.step_ns, p.simulated->step_ns);
  }
}

// Tiny-GPT with `layers` layers, all dense.
LayoutRequest tiny_with_layers(int layers, int gpus, std::int64_t global_batch) {
  LayoutRequest r = tiny(gpus, global_batch);
  r.model.num_layers = layers;
  r.model.architecture.dense_layers = layers;
  return r;
}

std::set<std::vector<int>> splits_of(const LayoutEnumeration& e, int pp, int vpp) {
  std::set<std::vector<int>> out;
  for (const LayoutCandidate& c : e.fitting)
    if (c.spec.layout.pp == pp && c.spec.layout.vpp == vpp) out.insert(c.spec.part_layers);
  return out;
}

TEST(LayoutPlanner, SplitsLayersUnevenlyWhereThePipelinesPartsDoNotDivideThem) {
  // 5 layers on 8 GPUs: pp 2 splits 7 units (with the embedding and the output layer) as 3 + 4,
  // the first part short of a unit: 2 + 3 layers; pp 4 would leave an end part no layer, and stays
  // refused under the divisibility rule.
  const LayoutEnumeration five = enumerate_layouts(tiny_with_layers(5, 8, 8));
  EXPECT_EQ(splits_of(five, 2, 1), (std::set<std::vector<int>>{{2, 3}}));
  EXPECT_EQ(splits_of(five, 1, 1), (std::set<std::vector<int>>{{}}));
  EXPECT_TRUE(splits_of(five, 4, 1).empty());
  EXPECT_GT(count_of(five, "--pp x --vpp = N does not divide the N layers of Tiny-GPT (give the layers of each part "
                           "with --part-layers)"),
            0);
  // 6 layers: pp 2 divides them (3 + 3, vpp 3: 1 each); vpp 2's 4 parts split 8 units evenly,
  // Megatron-Core's accounted split 1 + 2 + 2 + 1.
  const LayoutRequest six = tiny_with_layers(6, 8, 8);
  const LayoutEnumeration e = enumerate_layouts(six);
  EXPECT_EQ(splits_of(e, 2, 1), (std::set<std::vector<int>>{{}}));
  EXPECT_EQ(splits_of(e, 2, 2), (std::set<std::vector<int>>{{1, 2, 2, 1}}));
  EXPECT_EQ(splits_of(e, 2, 3), (std::set<std::vector<int>>{{}}));
  for (const LayoutCandidate& c : e.fitting) {
    if (c.spec.part_layers.empty()) continue;
    StepShape shape;
    ASSERT_NO_THROW(shape = derive_step_shape(six.model, six.cluster, c.spec));
    EXPECT_EQ(shape.parts.front().layers, 1);
    EXPECT_EQ(c.memory_estimate_bytes, closed_form_peak_bytes(six.model, c.spec, shape));
  }
}

// The closed form against the simulated peak on an uneven split (5 layers as 2 + 3): equal
// without recomputation; above it with full recomputation (where it also counts the largest
// layer's recomputed tensors, which the simulation frees sooner), never below.
TEST(LayoutPlanner, ClosedFormPeakOfAnUnevenSplitCoversTheSimulatedPeak) {
  const LayoutRequest r = tiny_with_layers(5, 8, 16);
  for (Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
    StepSpec spec;
    spec.layout = StepLayout{8, 2, 2, 1, 1, 1};
    spec.global_batch = 16;
    spec.sequence_parallel = true;
    spec.recompute = recompute;
    spec.part_layers = balanced_part_layers(5, 2);
    ASSERT_EQ(spec.part_layers, (std::vector<int>{2, 3}));
    const StepShape shape = derive_step_shape(r.model, r.cluster, spec);
    const auto closed = static_cast<double>(closed_form_peak_bytes(r.model, spec, shape));
    const auto simulated = static_cast<double>(simulate_training_step(r.model, r.cluster, spec).report.peak_memory_bytes);
    std::printf("recompute %s: closed form %.4f GiB, simulated %.4f GiB\n", std::string(to_string(recompute)).c_str(),
                closed / (1 << 30), simulated / (1 << 30));
    EXPECT_GE(closed, simulated);
    EXPECT_LE(closed, simulated * (recompute == Recompute::kNone ? 1.0 : 1.25));
  }
}

TEST(LayoutPlanner, FixedAxesKeepExactlyTheMatchingLayoutsOfTheFullEnumeration) {
  LayoutRequest r = tiny_moe(8, 8);
  r.moe_chunks = {1};
  std::set<std::string> expected;
  for (const LayoutCandidate& c : enumerate_layouts(r).fitting) {
    const StepLayout& l = c.spec.layout;
    if ((l.tp == 1 || l.tp == 4) && l.pp == 2 && l.ep == 2 && l.expert_tp() == 1 && c.spec.micro_batch == 1)
      expected.insert(key(c.spec));
  }
  ASSERT_FALSE(expected.empty());
  r.only.tp = {1, 4};
  r.only.pp = {2};
  r.only.ep = {2};
  r.only.etp = {1};
  r.only.micro_batch = {1};
  std::set<std::string> kept;
  for (const LayoutCandidate& c : enumerate_layouts(r).fitting) kept.insert(key(c.spec));
  EXPECT_EQ(kept, expected);
  EXPECT_NO_THROW(check_fixed_axes(r));
  r.only.vpp = {3};  // 4 layers: pp 2 x vpp 3 neither divides them nor 4 + 2 with two a part
  EXPECT_TRUE(enumerate_layouts(r).fitting.empty());
  EXPECT_THAT(moesim::testing::input_error_of([&] { check_fixed_axes(r); }),
              HasSubstr("--tp 1,4 --pp 2 --vpp 3 --ep 2 --etp 1 --micro-batch 1: no candidate layout of this request "
                        "has these values together"));
  r.only.vpp = {};
  r.only.tp = {1, 4, 8};  // tp 8 leaves pp 2 no GPU
  EXPECT_THAT(moesim::testing::input_error_of([&] { check_fixed_axes(r); }),
              HasSubstr("--tp 8: no candidate layout of this request has it with the other axes as given"));
  r.only = LayoutAxes{};
  r.only.pp = {3};  // alone: its own rule
  EXPECT_THAT(moesim::testing::input_error_of([&] { check_fixed_axes(r); }),
              HasSubstr("--pp 3: no candidate layout of this request has it (pp: the divisors of GPUs / (tp x cp) up "
                        "to the layers)"));
}

// --recompute and --recompute-modules: the recomputations tried, selective once with each set of
// modules given; dropping the norms' and the experts' activation outputs lowers the closed-form
// peak, and recomputing the whole MoE layer lowers it further.
TEST(LayoutPlanner, TriesTheRequestedRecomputationsWithEachSetOfModules) {
  LayoutRequest r = tiny_moe(8, 8);
  r.moe_chunks = {1};
  r.only.recompute = {Recompute::kNone, Recompute::kSelective};
  RecomputeModules norms_act, moe;
  norms_act.core_attn = moe.core_attn = false;
  norms_act.layernorm = norms_act.moe_act = true;
  moe.moe = true;
  r.selective_sets = {norms_act, moe};
  // By the rest of the layout: the peak without recomputation and with each set.
  std::map<std::string, std::map<std::string, std::int64_t>> peaks;
  int none = 0, with_norms_act = 0, with_moe = 0;
  for (const LayoutCandidate& c : enumerate_layouts(r).fitting) {
    EXPECT_NE(c.spec.recompute, Recompute::kFull);
    if (c.spec.recompute == Recompute::kSelective) {
      EXPECT_TRUE(c.spec.recompute_modules == norms_act || c.spec.recompute_modules == moe);
      (c.spec.recompute_modules == moe ? with_moe : with_norms_act) += 1;
    } else {
      EXPECT_EQ(c.spec.recompute_modules, RecomputeModules{});
      ++none;
    }
    StepSpec rest = c.spec;
    rest.recompute = Recompute::kNone;
    rest.recompute_modules = {};
    const std::string what = c.spec.recompute == Recompute::kNone ? "none" : to_string(c.spec.recompute_modules);
    peaks[key(rest)][what] = c.memory_estimate_bytes;
  }
  EXPECT_GT(none, 0);
  EXPECT_EQ(with_norms_act, none);  // every layout fits with either set (tiny-moe on 8 GPUs)
  EXPECT_EQ(with_moe, none);
  // Never higher; lower where more than one layer's worth is kept at the peak (with one, the
  // re-created tensors of the layer in backward take the room the dropped ones left).
  int lower = 0, lower_still = 0;
  for (const auto& [layout, by] : peaks) {
    ASSERT_EQ(by.size(), 3u) << layout;
    EXPECT_LE(by.at("layernorm,moe_act"), by.at("none")) << layout;
    EXPECT_LE(by.at("moe"), by.at("layernorm,moe_act")) << layout;
    lower += by.at("layernorm,moe_act") < by.at("none");
    lower_still += by.at("moe") < by.at("layernorm,moe_act");
  }
  EXPECT_GT(lower, 0);
  EXPECT_GT(lower_still, 0);
}

TEST(LayoutPlanner, RanksTheSimulatedLayoutsByTheirSimulatedStep) {
  const LayoutRequest r = tiny(16, 32);
  const LayoutPlan plan = plan_layouts(r);
  ASSERT_EQ(plan.simulated.size(), std::min<std::size_t>(2 * 3, plan.enumeration.fitting.size()));
  ASSERT_EQ(plan.estimates.size(), plan.enumeration.fitting.size());
  for (std::size_t k = 0; k < plan.simulated.size(); ++k) {
    const StepReport& rep = *plan.simulated[k].simulated;
    // The reported figures are the full simulation's.
    EXPECT_EQ(rep.step_ns, simulate_training_step(r.model, r.cluster, plan.simulated[k].candidate.spec).report.step_ns);
    if (k == 0) continue;
    const StepReport& prev = *plan.simulated[k - 1].simulated;
    EXPECT_TRUE(prev.fits >= rep.fits);
    if (prev.fits == rep.fits) {
      EXPECT_LE(prev.step_ns, rep.step_ns);
    }
  }
  // The layouts simulated are the estimate's best: none left out estimates faster than the slowest kept.
  TimeNs slowest_kept = 0;
  for (const PlannedLayout& p : plan.simulated) slowest_kept = std::max(slowest_kept, p.estimate.step_ns);
  std::size_t faster_left_out = 0;
  for (std::size_t i = 0; i < plan.estimates.size(); ++i) {
    bool kept = false;
    for (const PlannedLayout& p : plan.simulated) kept |= key(p.candidate.spec) == key(plan.enumeration.fitting[i].spec);
    if (!kept && plan.estimates[i].step_ns < slowest_kept) ++faster_left_out;
  }
  EXPECT_EQ(faster_left_out, 0u);
}

TEST(LayoutPlanner, TokenRateSearchStopsAtTheFirstNodeCountThatReachesTheTarget) {
  LayoutRequest r = tiny(8, 32);
  r.top = 1;
  auto rate_at = [&](int gpus) {
    LayoutRequest q = r;
    q.cluster = cluster(gpus);
    const LayoutPlan plan = plan_layouts(q);
    return plan.simulated.front().simulated->tokens_per_s_per_gpu * gpus * 86400.0;
  };
  const double one = rate_at(8);
  const double two = rate_at(16);
  ASSERT_GT(two, one) << "a batch of 32 sequences still scales from 8 to 16 GPUs";
  // Two nodes' best rate: one node falls short, two reach it, and the search stops there.
  const TokenRateSearch s = plan_for_token_rate(r, two, 4);
  ASSERT_TRUE(s.answer.has_value());
  EXPECT_EQ(*s.answer, 1u);
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(s.steps[0].nodes, 1);
  EXPECT_EQ(s.steps[0].tokens_per_day, one);
  EXPECT_EQ(s.steps[1].gpus, 16);
  EXPECT_EQ(s.steps[1].tokens_per_day, two);
  // A target no count up to the limit reaches: every count is tried and there is no answer.
  const TokenRateSearch none = plan_for_token_rate(r, 2 * two, 2);
  EXPECT_FALSE(none.answer.has_value());
  EXPECT_EQ(none.steps.size(), 2u);
}

}  // namespace
}  // namespace moesim::search
