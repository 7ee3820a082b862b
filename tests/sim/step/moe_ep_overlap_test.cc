// Megatron-Core's combined 1F1B in the whole step (--overlap-moe-expert-parallel-comm,
// StepSpec::overlap_moe_ep_comm): the layouts it is refused for, and that each steady-state pair's
// forward collectives run beside the other pass's kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/step/step_simulation.h"
#include "tests/sim/spec/spec_test_util.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

using moesim::testing::input_error_of;
using ::testing::HasSubstr;

// Qwen3-30B-A3B on 16 H100s, interleaved: pp 2, vpp 2, ep 4 (small_moe_step with two chunks a stage).
StepSpec interleaved_moe_step(bool overlap) {
  StepSpec s = testing::small_moe_step();
  s.layout.vpp = 2;
  s.overlap_moe_ep_comm = overlap;
  return s;
}

SimulatedStep simulate(const StepSpec& s) {
  return simulate_training_step(testing::model_preset("qwen3-30b-a3b"), testing::cluster_preset("dgx-h100-ndr", 16), s);
}

TEST(MoeEpOverlap, IsRefusedWhereMegatronCoreRefusesIt) {
  StepSpec dense = testing::small_gpt_step();
  dense.overlap_moe_ep_comm = true;
  EXPECT_THAT(testing::step_error_of(dense),
              HasSubstr("--overlap-moe-expert-parallel-comm overlaps the MoE layers' all-to-alls; GPT-1.7B has none"));
  StepSpec plain = testing::small_moe_step();
  plain.overlap_moe_ep_comm = true;
  EXPECT_THAT(testing::step_error_of(plain, "qwen3-30b-a3b"),
              HasSubstr("--overlap-moe-expert-parallel-comm with --schedule 1f1b and --pp 2: Megatron-Core's combined "
                        "1F1B runs without pipelining (--pp 1) or with the interleaved schedule (--vpp > 1)"));
  EXPECT_EQ(testing::step_error_of(interleaved_moe_step(true), "qwen3-30b-a3b"), "");
  // Megatron-Core's TransformerConfig refuses expert parallelism 1 and full recomputation.
  StepSpec no_ep = interleaved_moe_step(true);
  no_ep.layout.ep = 1;
  EXPECT_THAT(testing::step_error_of(no_ep, "qwen3-30b-a3b"),
              HasSubstr("--overlap-moe-expert-parallel-comm with --ep 1: there is no expert-parallel all-to-all to "
                        "overlap"));
  StepSpec full = interleaved_moe_step(true);
  full.recompute = Recompute::kFull;
  EXPECT_THAT(testing::step_error_of(full, "qwen3-30b-a3b"),
              HasSubstr("--overlap-moe-expert-parallel-comm with --recompute full: Megatron-Core refuses it"));
  StepSpec zero3 = interleaved_moe_step(true);
  zero3.zero_stage = 3;
  EXPECT_THAT(testing::step_error_of(zero3, "qwen3-30b-a3b"),
              HasSubstr("--overlap-moe-expert-parallel-comm with --zero 3: ZeRO-3's per-layer weight gathers inside the "
                        "interleaved pairs are not modelled"));
  ModelSpec two_mtp = testing::model_preset("qwen3-30b-a3b");
  two_mtp.architecture.mtp_depth = 2;
  EXPECT_THAT(input_error_of([&] { build_step_graph(two_mtp, testing::a100_cluster(16), interleaved_moe_step(true)); }),
              HasSubstr("--overlap-moe-expert-parallel-comm with 2 multi-token prediction modules: Megatron-Core "
                        "supports one"));
}

TEST(MoeEpOverlap, EachPairsForwardCollectivesRunBesideTheBackwardsKernels) {
  const SimulatedStep plain = simulate(interleaved_moe_step(false));
  const SimulatedStep overlapped = simulate(interleaved_moe_step(true));
  EXPECT_TRUE(plain.graph.interleaved.empty());
  ASSERT_FALSE(overlapped.graph.interleaved.empty());
  EXPECT_EQ(testing::collectives_beside_the_other_pass(plain), 0);
  EXPECT_GT(testing::collectives_beside_the_other_pass(overlapped), 0);
  EXPECT_TRUE(testing::backward_kernels_precede_forward_kernels(overlapped));
  // The same work: every task of the plain step has its counterpart.
  EXPECT_EQ(overlapped.graph.graph.num_tasks(), plain.graph.graph.num_tasks());
  EXPECT_NE(overlapped.report.step_ns, plain.report.step_ns);
}

TEST(MoeEpOverlap, WithoutPipeliningEveryForwardButTheFirstIsPaired) {
  StepSpec s;
  s.layout.gpus = 8;
  s.layout.ep = 8;
  s.global_batch = 32;
  s.seq = 512;
  s.overlap_moe_ep_comm = true;
  const SimulatedStep sim = simulate_training_step(testing::model_preset("qwen3-30b-a3b"),
                                                   testing::cluster_preset("dgx-h100-ndr", 8), s);
  // 4 microbatches: F0, then (F1, B0), (F2, B1), (F3, B2), then B3.
  EXPECT_EQ(sim.graph.interleaved.size(), 3u);
  EXPECT_GT(testing::collectives_beside_the_other_pass(sim), 0);
}

}  // namespace
}  // namespace moesim
