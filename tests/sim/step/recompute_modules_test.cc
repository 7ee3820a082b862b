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

TEST(RecomputeModules, LayernormDropsTheOutputsOfTheNormsThatAreModulesOfTheirOwn) {
  // Llama 3 70B (GQA, dense): Transformer Engine fuses both norms into the linear layers after
  // them (TELayerNormColumnParallelLinear keeps the norm's output): nothing to drop. Nor does
  // moe_act on a dense layer.
  const ModelSpec llama = preset("llama-3-70b");
  const LayerActivations none = dense_layer_activations(llama, flash_sp(8, Recompute::kNone, {}));
  for (RecomputeModules modules : {RecomputeModules{false, true, false}, RecomputeModules{false, false, true}}) {
    const LayerActivations a = dense_layer_activations(llama, flash_sp(8, Recompute::kSelective, modules));
    EXPECT_EQ(a.kept_bytes, none.kept_bytes);
    EXPECT_EQ(a.recompute_bytes, 0);
  }
  // Qwen3-30B-A3B (GQA, MoE): the pre-MLP norm before the router is a module of its own: one
  // output, d_model 2048 x 2 bytes / t 2 with SP = 2,048 bytes a token of the 4,096.
  const ModelSpec qwen = preset("qwen3-30b-a3b");
  ActivationLayout l = flash_sp(2, Recompute::kNone, {});
  l.seq = 4096;
  const LayerActivations moe_none = moe_layer_activations(qwen, l, 1);
  l.recompute = Recompute::kSelective;
  l.modules = {false, true, false};
  const LayerActivations moe_norm = moe_layer_activations(qwen, l, 1);
  EXPECT_EQ(moe_none.kept_bytes - moe_norm.kept_bytes, 2048 * 4096);
  EXPECT_EQ(moe_norm.recompute_bytes, 2048 * 4096);
  // DeepSeek-V3 (MLA): its input norm is a module too: a dense layer drops one output, an MoE
  // layer two (d_model 7168 x 2 bytes, t 1: 14,336 bytes a token each).
  const ModelSpec ds = preset("deepseek-v3");
  ActivationLayout dl = flash_sp(1, Recompute::kNone, {});
  dl.seq = 1024;
  const std::int64_t dense_none = dense_layer_activations(ds, dl).kept_bytes;
  const std::int64_t moe_kept_none = moe_layer_activations(ds, dl, 1).kept_bytes;
  dl.recompute = Recompute::kSelective;
  dl.modules = {false, true, false};
  EXPECT_EQ(dense_none - dense_layer_activations(ds, dl).kept_bytes, 14336 * 1024);
  EXPECT_EQ(moe_kept_none - moe_layer_activations(ds, dl, 1).kept_bytes, 2 * 14336 * 1024);
}

TEST(RecomputeModules, ParsesMegatronsNamesEachOnce) {
  std::string error;
  EXPECT_EQ(parse_recompute_modules("moe_act,layernorm", error), (RecomputeModules{false, true, true}));
  for (const char* bad : {"", "layernorm,", ",layernorm", "layernorm,,moe_act", "layernorm,layernorm", "mlp"}) {
    EXPECT_FALSE(parse_recompute_modules(bad, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  EXPECT_FALSE(parse_recompute_modules("layernorm,layernorm", error));
  EXPECT_EQ(error, "'layernorm' named twice");
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
  // Each of the two stages' layers, every microbatch: the pre-MLP norm (the input norm is fused
  // into the QKV projection) and the experts' activation.
  EXPECT_EQ(count_tasks(g, ".recompute.ln1"), 0);
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

TEST(RecomputeModules, AModuleThatDropsNothingIsRefused) {
  StepSpec s = testing::small_gpt_step();
  s.recompute = Recompute::kSelective;
  s.recompute_modules = {false, false, true};
  EXPECT_THAT(testing::step_error_of(s, "gpt-1.7b"),
              ::testing::HasSubstr("--recompute-modules moe_act re-runs the routed experts' activation; GPT-1.7B has "
                                   "no MoE layer"));
  s.recompute_modules = {false, true, false};
  EXPECT_THAT(testing::step_error_of(s, "gpt-1.7b"),
              ::testing::HasSubstr("--recompute-modules layernorm drops nothing for GPT-1.7B"));
}

}  // namespace
}  // namespace moesim
