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

// The modules of a Megatron-Core list such as "layernorm,moe_act".
RecomputeModules named(const char* list) {
  std::string error;
  const auto m = parse_recompute_modules(list, error);
  if (!m) throw InternalError(error);
  return *m;
}

int count_tasks(const TaskGraph& g, const std::string& id_part) {
  int n = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) n += g.task(i).id.find(id_part) != std::string::npos;
  return n;
}

int count_tasks_ending(const TaskGraph& g, const std::string& suffix) {
  int n = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) n += g.task(i).id.ends_with(suffix);
  return n;
}

TEST(RecomputeModules, LayernormDropsTheOutputsOfTheNormsThatAreModulesOfTheirOwn) {
  // Llama 3 70B (GQA, dense): Transformer Engine fuses both norms into the linear layers after
  // them (TELayerNormColumnParallelLinear keeps the norm's output): nothing to drop. Nor does
  // moe_act on a dense layer.
  const ModelSpec llama = preset("llama-3-70b");
  const LayerActivations none = dense_layer_activations(llama, flash_sp(8, Recompute::kNone, {}));
  for (RecomputeModules modules : {named("layernorm"), named("moe_act")}) {
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
  l.modules = named("layernorm");
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
  dl.modules = named("layernorm");
  EXPECT_EQ(dense_none - dense_layer_activations(ds, dl).kept_bytes, 14336 * 1024);
  EXPECT_EQ(moe_kept_none - moe_layer_activations(ds, dl, 1).kept_bytes, 2 * 14336 * 1024);
}

TEST(RecomputeModules, ParsesMegatronsNamesEachOnce) {
  std::string error;
  RecomputeModules expected;
  expected.core_attn = false;
  expected.layernorm = expected.moe_act = true;
  EXPECT_EQ(parse_recompute_modules("moe_act,layernorm", error), expected);
  // Reports and JSON write the modules in Megatron-Core's order of moesim's list.
  EXPECT_EQ(to_string(named("shared_experts,mla_up_proj,moe,mlp,core_attn")), "core_attn,mla_up_proj,mlp,moe,shared_experts");
  for (const char* bad : {"", "layernorm,", ",layernorm", "layernorm,,moe_act", "layernorm,layernorm", "qkv"}) {
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
    const LayerActivations act = moe_layer_activations(m, flash_sp(tp, Recompute::kSelective, named("moe_act")), 1);
    EXPECT_EQ(act.kept_bytes, none.kept_bytes - act_output);
    EXPECT_EQ(act.recompute_bytes, act_output);
  }
  ActivationLayout reuse = flash_sp(1, Recompute::kSelective, named("moe_act"));
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
  modules.recompute_modules = named("layernorm,moe_act");
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
  s.recompute_modules = named("moe_act");
  EXPECT_THAT(testing::step_error_of(s, "gpt-1.7b"),
              ::testing::HasSubstr("--recompute-modules moe_act re-runs the routed experts' activation; GPT-1.7B has "
                                   "no MoE layer"));
  s.recompute_modules = named("layernorm");
  EXPECT_THAT(testing::step_error_of(s, "gpt-1.7b"),
              ::testing::HasSubstr("--recompute-modules layernorm drops nothing for GPT-1.7B"));
}

TEST(RecomputeModules, MlaUpProjDropsTheQueriesKeysAndValues) {
  // DeepSeek-V3: 128 heads, q and k 128 + 64 wide a head, v 128: 2 x 24,576 + 16,384 = 65,536
  // columns x 2 bytes a token, in dense and MoE layers alike; split over the heads' tp ranks.
  const ModelSpec ds = preset("deepseek-v3");
  for (int tp : {1, 2}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    ActivationLayout none = flash_sp(tp, Recompute::kNone, {});
    none.seq = 1024;
    ActivationLayout up = none;
    up.recompute = Recompute::kSelective;
    up.modules = named("mla_up_proj");
    const std::int64_t qkv = 65536LL * 2 * 1024 / tp;
    EXPECT_EQ(dense_layer_activations(ds, none).kept_bytes - dense_layer_activations(ds, up).kept_bytes, qkv);
    EXPECT_EQ(dense_layer_activations(ds, up).recompute_bytes, qkv);
    EXPECT_EQ(moe_layer_activations(ds, none, 1).kept_bytes - moe_layer_activations(ds, up, 1).kept_bytes, qkv);
  }
}

TEST(RecomputeModules, MlpDropsADenseMlpsNormOutputAndColumns) {
  // Llama 3 70B at tp 8 with SP: fc1's input 8,192 x 2 bytes / 8 and the SwiGLU columns
  // (2 x 28,672 + 28,672) / 8 x 2 bytes: 2,048 + 21,504 bytes a token.
  const ModelSpec llama = preset("llama-3-70b");
  ActivationLayout none = flash_sp(8, Recompute::kNone, {});
  none.seq = 4096;
  ActivationLayout mlp = none;
  mlp.recompute = Recompute::kSelective;
  mlp.modules = named("mlp");
  EXPECT_EQ(dense_layer_activations(llama, none).kept_bytes - dense_layer_activations(llama, mlp).kept_bytes,
            23552LL * 4096);
  EXPECT_EQ(dense_layer_activations(llama, mlp).recompute_bytes, 23552LL * 4096);
  // An MoE layer's MLP is the module moe: mlp leaves it alone.
  const ModelSpec qwen = preset("qwen3-30b-a3b");
  none.tp = mlp.tp = 2;
  EXPECT_EQ(moe_layer_activations(qwen, mlp, 1).kept_bytes, moe_layer_activations(qwen, none, 1).kept_bytes);
  EXPECT_EQ(moe_layer_activations(qwen, mlp, 1).recompute_bytes, 0);
}

TEST(RecomputeModules, MoeDropsTheMoeLayerButItsInput) {
  // Qwen3-30B-A3B, one 4,096-token sequence, tp 1: 128 experts x floor(8 x 4,096 / 128) = 32,768
  // rows. Dropped: the fp32 router scores and top-k weights 4,096 x 136 x 4, T_DI and the rows
  // kept for the combine 32,768 x 2,048 x 2 each, the columns 32,768 x 2,304 x 2.
  const ModelSpec m = preset("qwen3-30b-a3b");
  ActivationLayout none = flash_sp(1, Recompute::kNone, {});
  none.seq = 4096;
  ActivationLayout moe = none;
  moe.recompute = Recompute::kSelective;
  moe.modules = named("moe");
  const std::int64_t dropped = 4096LL * 136 * 4 + 2 * 32768LL * 2048 * 2 + 32768LL * 2304 * 2;
  EXPECT_EQ(moe_layer_activations(m, none, 1).kept_bytes - moe_layer_activations(m, moe, 1).kept_bytes, dropped);
  EXPECT_EQ(moe_layer_activations(m, moe, 1).recompute_bytes, dropped);
  // moe_act's tensor is inside the module: naming both drops it once.
  ActivationLayout both = moe;
  both.modules = named("moe,moe_act");
  EXPECT_EQ(moe_layer_activations(m, both, 1).kept_bytes, moe_layer_activations(m, moe, 1).kept_bytes);
  EXPECT_EQ(moe_layer_activations(m, both, 1).recompute_bytes, dropped);
  moe.moe_strategy = MemoryStrategy::kS2;
  EXPECT_THROW(moe_layer_activations(m, moe, 1), InputError);
}

TEST(RecomputeModules, SharedExpertsDropTheirColumns) {
  // DeepSeek-V3's shared expert: SwiGLU of 2,048, 3 x 2,048 columns x 2 bytes a token.
  const ModelSpec ds = preset("deepseek-v3");
  ActivationLayout none = flash_sp(1, Recompute::kNone, {});
  none.seq = 1024;
  ActivationLayout shared = none;
  shared.recompute = Recompute::kSelective;
  shared.modules = named("shared_experts");
  EXPECT_EQ(moe_layer_activations(ds, none, 1).kept_bytes - moe_layer_activations(ds, shared, 1).kept_bytes,
            6144LL * 2 * 1024);
  EXPECT_EQ(moe_layer_activations(ds, shared, 1).recompute_bytes, 6144LL * 2 * 1024);
  EXPECT_EQ(dense_layer_activations(ds, shared).recompute_bytes, 0);  // a dense layer has none
}

// DeepSeek-V3 cut to 4 layers, the first `dense_layers` dense, without its MTP module: quick to
// simulate.
ModelSpec small_deepseek(int dense_layers) {
  ModelSpec m = preset("deepseek-v3");
  m.num_layers = 4;
  m.architecture.dense_layers = dense_layers;
  m.architecture.mtp_depth = 0;
  return m;
}

StepSpec small_deepseek_step(const char* modules) {
  StepSpec s = testing::small_moe_step();
  s.recompute = Recompute::kSelective;
  s.recompute_modules = named(modules);
  return s;
}

TEST(RecomputeModules, TheStepReRunsTheNewModulesTasks) {
  // 2 dense and 2 MoE layers over 2 stages of 2 microbatches each: stage 0 has the dense ones.
  const ModelSpec m = small_deepseek(2);
  const SimulatedStep sim =
      simulate_training_step(m, testing::a100_cluster(16), small_deepseek_step("mla_up_proj,mlp,shared_experts"));
  const TaskGraph& g = sim.graph.graph;
  const int layers = 4, microbatches = 2, dense = 2;
  EXPECT_EQ(count_tasks(g, ".recompute.q_up"), layers * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.kv_up"), layers * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.q_down"), 0);  // its input is kept
  // The latents, kept as the rank's sequence-parallel shard, gathered again before them.
  EXPECT_EQ(count_tasks(g, ".recompute.tp.mla_up.allgather"), layers * microbatches);
  // A dense MLP's whole forward, its fused norm and tensor-parallel collectives included.
  EXPECT_EQ(count_tasks(g, ".recompute.ln2"), dense * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.fc1"), dense * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.fc2"), dense * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.tp.mlp.allgather"), dense * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.tp.mlp.reducescatter"), dense * microbatches);
  // The shared experts of the MoE layers, with their own sequence-parallel collectives.
  EXPECT_EQ(count_tasks(g, ".recompute.shared.fc1"), (layers - dense) * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.shared.tp.allgather"), (layers - dense) * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.shared.tp.reducescatter"), (layers - dense) * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.experts."), 0);
  EXPECT_EQ(count_tasks(g, ".recompute.core"), 0);

  // moe: the MoE layer's whole MLP again, its all-to-alls included, from the pre-MLP norm's output.
  const SimulatedStep moe = simulate_training_step(small_deepseek(0), testing::a100_cluster(16), small_deepseek_step("moe"));
  const TaskGraph& mg = moe.graph.graph;
  EXPECT_EQ(count_tasks(mg, ".recompute.router"), layers * microbatches);
  EXPECT_EQ(count_tasks_ending(mg, ".recompute.dispatch"), layers * microbatches);
  EXPECT_EQ(count_tasks_ending(mg, ".recompute.combine"), layers * microbatches);
  // Each rank routes its sequence-parallel shard: the experts' all-gather over their
  // tensor-parallel group again, no block all-gather (Megatron-Core's dispatcher).
  EXPECT_EQ(count_tasks(mg, ".recompute.tp.mlp.allgather"), 0);
  EXPECT_EQ(count_tasks(mg, ".recompute.experts.tp.allgather"), layers * microbatches);
  EXPECT_EQ(count_tasks(mg, ".recompute.experts.fc2"), layers * microbatches);
  EXPECT_EQ(count_tasks(mg, ".recompute.shared.fc2"), layers * microbatches);
  EXPECT_EQ(count_tasks(mg, ".recompute.ln2"), 0);
}

// The shared experts' own collectives in the recomputation: tensor parallelism without sequence
// parallelism reduces their output with an all-reduce; folded experts (etp 1) gather their input
// as in the first forward. MLA without a query latent re-runs q's projection; FP8 quantises the
// re-run GEMMs' inputs.
TEST(RecomputeModules, TheRecomputationsCollectivesFollowTheLayout) {
  const ModelSpec m = small_deepseek(0);
  const int layers = 4, microbatches = 2;
  StepSpec no_sp = small_deepseek_step("shared_experts");
  no_sp.sequence_parallel = false;
  const TaskGraph g = simulate_training_step(m, testing::a100_cluster(16), no_sp).graph.graph;
  EXPECT_EQ(count_tasks(g, ".recompute.shared.tp.allreduce"), layers * microbatches);
  EXPECT_EQ(count_tasks(g, ".recompute.shared.tp.allgather"), 0);

  StepSpec folded = small_deepseek_step("shared_experts");
  folded.layout.etp = 1;
  const TaskGraph f = simulate_training_step(m, testing::a100_cluster(16), folded).graph.graph;
  EXPECT_EQ(count_tasks(f, ".recompute.shared.tp.allgather"), layers * microbatches);
  EXPECT_EQ(count_tasks(f, ".recompute.shared.tp.reducescatter"), layers * microbatches);

  ModelSpec no_q_latent = m;
  no_q_latent.architecture.attention.q_lora_rank = 0;
  StepSpec fp8 = small_deepseek_step("mla_up_proj");
  fp8.gemm_precision = DType::kFp8;
  const TaskGraph q = simulate_training_step(no_q_latent, testing::cluster_preset("dgx-h100-ndr", 16), fp8).graph.graph;
  EXPECT_EQ(count_tasks_ending(q, ".recompute.q"), layers * microbatches);
  EXPECT_EQ(count_tasks_ending(q, ".recompute.kv_up"), layers * microbatches);
  EXPECT_EQ(count_tasks_ending(q, ".recompute.q.fp8.input"), layers * microbatches);
  EXPECT_EQ(count_tasks_ending(q, ".recompute.kv_up.fp8.input"), layers * microbatches);
}

// The peak of stage 0 (1F1B: pp - 0 microbatches in flight) falls by what each of its layers
// keeps less, less the one layer's re-created tensors alive during its backward.
void expect_peak_falls_by_the_closed_form(const ModelSpec& m, const StepSpec& none, const char* modules,
                                          bool moe_layers) {
  SCOPED_TRACE(modules);
  StepSpec with = none;
  with.recompute = Recompute::kSelective;
  with.recompute_modules = named(modules);
  const SimulatedStep a = simulate_training_step(m, testing::a100_cluster(none.layout.gpus), none);
  const SimulatedStep b = simulate_training_step(m, testing::a100_cluster(none.layout.gpus), with);
  const ActivationLayout l0 = activation_layout(b.report.shape, none);
  const ActivationLayout l1 = activation_layout(b.report.shape, with);
  const int ep = b.report.shape.layout.ep;
  const auto layer = [&](const ActivationLayout& l) {
    return moe_layers ? moe_layer_activations(m, l, ep) : dense_layer_activations(m, l);
  };
  const std::int64_t kept_less = layer(l0).kept_bytes - layer(l1).kept_bytes;
  ASSERT_GT(kept_less, 0);
  const int in_flight = none.layout.pp, layers_per_stage = m.num_layers / none.layout.pp;
  EXPECT_EQ(a.report.stages[0].peak_memory_bytes - b.report.stages[0].peak_memory_bytes,
            in_flight * layers_per_stage * kept_less - layer(l1).recompute_bytes);
  EXPECT_GT(b.report.step_ns, a.report.step_ns);
}

TEST(RecomputeModules, EachNewModulesPeakFallsByTheClosedForm) {
  StepSpec moe = testing::small_moe_step();
  moe.layout.gpus = 16;
  expect_peak_falls_by_the_closed_form(small_deepseek(0), moe, "mla_up_proj", true);
  expect_peak_falls_by_the_closed_form(small_deepseek(0), moe, "shared_experts", true);
  expect_peak_falls_by_the_closed_form(small_deepseek(0), moe, "moe", true);
  StepSpec gpt = testing::small_gpt_step();
  gpt.sequence_parallel = true;
  expect_peak_falls_by_the_closed_form(preset("gpt-1.7b"), gpt, "mlp", false);
}

TEST(RecomputeModules, TheNewModulesAreRefusedWhereTheyDropNothing) {
  StepSpec s = testing::small_gpt_step();
  s.recompute = Recompute::kSelective;
  s.recompute_modules = named("mla_up_proj");
  EXPECT_THAT(testing::step_error_of(s, "gpt-1.7b"), ::testing::HasSubstr("GPT-1.7B has no MLA attention"));
  s.recompute_modules = named("moe");
  EXPECT_THAT(testing::step_error_of(s, "gpt-1.7b"), ::testing::HasSubstr("GPT-1.7B has no MoE layer"));
  StepSpec moe = testing::small_moe_step();
  moe.recompute = Recompute::kSelective;
  moe.recompute_modules = named("mlp");
  EXPECT_THAT(testing::step_error_of(moe, "qwen3-30b-a3b"),
              ::testing::HasSubstr("--recompute-modules mlp re-runs the dense layers' MLPs; Qwen3-30B-A3B has none"));
  moe.recompute_modules = named("shared_experts");
  EXPECT_THAT(testing::step_error_of(moe, "qwen3-30b-a3b"),
              ::testing::HasSubstr("re-runs the shared experts; Qwen3-30B-A3B has none"));
}

}  // namespace
}  // namespace moesim
