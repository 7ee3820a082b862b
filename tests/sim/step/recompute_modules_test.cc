// Selective recomputation of Megatron-Core's modules (--recompute-modules; StepSpec::
// recompute_modules): what each drops from a layer's kept activations (sim/memory/activations.h),
// that the step re-runs it before the layer's backward (sim/step), and that the simulated peak
// falls by what the closed form says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/memory/activations.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr auto& preset = testing::model_preset;

ActivationLayout flash_sp(int tp, Recompute r, RecomputeModules modules) {
  ActivationLayout l;
  l.tp = tp;
  l.sequence_parallel = tp > 1;
  l.recompute = r;
  l.attention = AttentionKernel::kFlash;
  l.modules = modules;
  return l;
}

int count_tasks(const TaskGraph& g, const std::string& id_part) {
  int n = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) n += g.task(i).id.find(id_part) != std::string::npos;
  return n;
}

TEST(RecomputeModules, LayernormDropsBothNormsOutputs) {
  // Llama 3 70B (h 8192, bf16), b 1, s 8192, t 8 with SP: each norm's output, the next GEMM's
  // d_model-wide input, is 8192 x 2 / 8 = 2048 bytes a token; none keeps 34,336 a token
  // (tests/sim/memory/activations_test.cc, Llama3_70bByHand).
  const ModelSpec m = preset("llama-3-70b");
  const std::int64_t tokens = 8192;
  const LayerActivations none = dense_layer_activations(m, flash_sp(8, Recompute::kNone, {}));
  ASSERT_EQ(none.kept_bytes, 34336 * tokens);
  const LayerActivations norms = dense_layer_activations(m, flash_sp(8, Recompute::kSelective, {false, true, false}));
  EXPECT_EQ(norms.kept_bytes, (34336 - 2 * 2048) * tokens);
  EXPECT_EQ(norms.recompute_bytes, 2 * 2048 * tokens);
  // moe_act on a dense layer drops nothing.
  const LayerActivations act = dense_layer_activations(m, flash_sp(8, Recompute::kSelective, {false, false, true}));
  EXPECT_EQ(act.kept_bytes, none.kept_bytes);
  EXPECT_EQ(act.recompute_bytes, 0);
}

TEST(RecomputeModules, MoeActDropsTheRoutedExpertsActivationOutput) {
  // Qwen3-30B-A3B (SwiGLU): the experts' kept columns T_M are fc1's 2 d_ffn and the activation's
  // d_ffn per routed row; moe_act drops the last third.
  const ModelSpec m = preset("qwen3-30b-a3b");
  for (int tp : {1, 2}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    const ActivationLayout none_layout = flash_sp(tp, Recompute::kNone, {});
    const std::int64_t act_output = moe_reused_tensors(m, none_layout).t_m / 3;
    ASSERT_GT(act_output, 0);
    const LayerActivations none = moe_layer_activations(m, none_layout, 1);
    const LayerActivations act = moe_layer_activations(m, flash_sp(tp, Recompute::kSelective, {false, false, true}), 1);
    EXPECT_EQ(act.kept_bytes, none.kept_bytes - act_output);
    EXPECT_EQ(act.recompute_bytes, act_output);
  }
  ActivationLayout reuse = flash_sp(1, Recompute::kSelective, {false, false, true});
  reuse.moe_strategy = MemoryStrategy::kS4;
  EXPECT_THROW(moe_layer_activations(m, reuse, 1), InputError);
}

// Qwen3-30B-A3B on 16 A100s (tp 2, pp 2, ep 4, 4 microbatches a pipeline): the step re-runs each
// module before the layer's backward, and its peak falls as the closed form's stage activations do.
TEST(RecomputeModules, TheStepReRunsTheModulesAndItsPeakFallsByTheClosedForm) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  StepSpec none;
  none.layout = StepLayout{16, 2, 2, 1, 4, 1};
  none.global_batch = 16;
  none.seq = 1024;
  none.sequence_parallel = true;
  StepSpec modules = none;
  modules.recompute = Recompute::kSelective;
  modules.recompute_modules = {false, true, true};
  const SimulatedStep a = simulate_training_step(m, testing::a100_cluster(16), none);
  const SimulatedStep b = simulate_training_step(m, testing::a100_cluster(16), modules);
  const TaskGraph& g = b.graph.graph;
  const int layers_per_stage = m.num_layers / 2, microbatches = 4;
  // Each of the two stages' layers, every microbatch: two norms and the experts' activation.
  EXPECT_EQ(count_tasks(g, ".recompute.ln1"), 2 * layers_per_stage * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.ln2"), 2 * layers_per_stage * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.experts.act"), 2 * layers_per_stage * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.core"), 0);  // core_attn not named
  EXPECT_EQ(count_tasks(a.graph.graph, ".recompute."), 0);
  EXPECT_GT(b.report.step_ns, a.report.step_ns);  // the re-run kernels
  EXPECT_LT(b.report.step_ns, a.report.step_ns * 1.05);
  // Stage 0 holds 2 microbatches of its layers at its peak (1F1B); the peak falls by what they
  // keep less, less the one layer's re-created tensors alive during its backward.
  const ActivationLayout l0 = activation_layout(b.report.shape, none);
  const ActivationLayout l1 = activation_layout(b.report.shape, modules);
  const std::int64_t kept_less = moe_layer_activations(m, l0, 4).kept_bytes - moe_layer_activations(m, l1, 4).kept_bytes;
  const std::int64_t recreated = moe_layer_activations(m, l1, 4).recompute_bytes;
  ASSERT_GT(kept_less, 0);
  EXPECT_EQ(a.report.stages[0].peak_memory_bytes - b.report.stages[0].peak_memory_bytes,
            2 * layers_per_stage * kept_less - recreated);
}

// core_attn with flash attention: Megatron-Core checkpoints the core, whose kernel runs again.
TEST(RecomputeModules, CoreAttentionReRunsTheFlashKernel) {
  StepSpec s = testing::small_gpt_step();
  s.sequence_parallel = true;
  s.recompute = Recompute::kSelective;
  const SimulatedStep sim = simulate_training_step(preset("gpt-1.7b"), testing::a100_cluster(16), s);
  EXPECT_EQ(count_tasks(sim.graph.graph, ".recompute.core"), 24 * 8);  // 24 layers, 8 microbatches
  EXPECT_EQ(count_tasks(sim.graph.graph, ".recompute.ln"), 0);
}

}  // namespace
}  // namespace moesim
