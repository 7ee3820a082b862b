// The optimizer step's tasks (sim/step/optimizer_step.h: Megatron-LM's zero_grad_buffer, grad
// unscaling, grad norm and its all-reduce, clipping, Adam, the copy to the model's weights) with
// their bytes from the parameters each GPU updates, and ZeRO-3's gathered weights in the peak
// memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <cstdio>

#include <algorithm>
#include <string>

#include "sim/memory/activations.h"
#include "sim/memory/model_states.h"
#include "sim/spec/model_parameters.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

ModelSpec preset(const std::string& name) { return testing::model_preset(name); }
ClusterSpec cluster(int gpus) { return testing::a100_cluster(gpus); }

// GPT-1.7B (fp16, 24 layers) on 16 GPUs: tp 2, pp 4, dp 2.
StepSpec small_step(int zero) {
  StepSpec s = testing::small_gpt_step();
  s.zero_stage = zero;
  return s;
}

const ElementwiseWork& kernel_work(const TaskGraph& g, const std::string& id, int rank) {
  const auto t = g.find(id, rank);
  if (!t) throw std::runtime_error("no task " + id);
  return std::get<ElementwiseWork>(g.task(*t).work);
}

TEST(OptimizerStep, EachKernelMovesTheBytesOfTheParametersItsGpuUpdates) {
  const ModelSpec model = preset("gpt-1.7b");
  for (const int zero : {0, 1, 2}) {
    const StepSpec spec = small_step(zero);
    const StepGraph sg = build_step_graph(model, cluster(16), spec);
    const auto states = model_states_per_gpu(model, states_layout(sg.shape, zero), stage_layers(sg.shape));
    for (int s = 0; s < 4; ++s) {
      const StageModelStates& st = states[static_cast<std::size_t>(s)];
      const int rank = sg.shape.stage_rank(s);
      // Parameters the GPU's optimizer updates: all of its own (ZeRO 0) or a half over dp 2.
      const double shard = (st.dense_params + st.expert_params) / (zero >= 1 ? 2.0 : 1.0);
      const auto bytes = [&](double per_param) { return static_cast<std::int64_t>(per_param * shard); };
      const std::string p = "stage" + std::to_string(s) + ".bwd.";
      SCOPED_TRACE("zero " + std::to_string(zero) + " stage " + std::to_string(s));
      // zero_grad_buffer writes the fp32 gradient buffer the model states hold.
      const auto& zero_grad = kernel_work(sg.graph, "stage" + std::to_string(s) + ".fwd.zero_grad_buffer", rank);
      EXPECT_EQ(zero_grad.bytes_read, 0);
      EXPECT_EQ(zero_grad.bytes_written, static_cast<std::int64_t>(st.grad_bytes));
      // fp16: unscale reads and writes the fp32 main grads.
      EXPECT_EQ(kernel_work(sg.graph, p + "unscale", rank).bytes_read, bytes(4));
      EXPECT_EQ(kernel_work(sg.graph, p + "unscale", rank).bytes_written, bytes(4));
      EXPECT_EQ(kernel_work(sg.graph, p + "grad_norm", rank).bytes_read, bytes(4));
      EXPECT_EQ(kernel_work(sg.graph, p + "grad_norm", rank).bytes_written, 0);
      EXPECT_EQ(kernel_work(sg.graph, p + "clip", rank).bytes_read, bytes(4));
      EXPECT_EQ(kernel_work(sg.graph, p + "clip", rank).bytes_written, bytes(4));
      EXPECT_EQ(kernel_work(sg.graph, p + "adam", rank).bytes_read, bytes(16));
      EXPECT_EQ(kernel_work(sg.graph, p + "adam", rank).bytes_written, bytes(12));
      EXPECT_EQ(kernel_work(sg.graph, p + "copy_main_to_model", rank).bytes_read, bytes(4));
      EXPECT_EQ(kernel_work(sg.graph, p + "copy_main_to_model", rank).bytes_written, bytes(2));
    }
  }
}

TEST(OptimizerStep, ZeroGradBufferRunsFirstOnEveryStagesComputeStream) {
  const StepGraph sg = build_step_graph(preset("gpt-1.7b"), cluster(16), small_step(1));
  for (int s = 0; s < 4; ++s) {
    const auto& tasks = sg.graph.stream_tasks(sg.shape.stage_rank(s), StreamClass::kCompute);
    ASSERT_FALSE(tasks.empty());
    EXPECT_EQ(sg.graph.task(tasks.front()).id, "stage" + std::to_string(s) + ".fwd.zero_grad_buffer");
  }
}

TEST(OptimizerStep, NormAllReducesOverTheGradStatsGroupBetweenNormAndClip) {
  const ModelSpec model = preset("gpt-1.7b");
  // The distributed optimizer: every GPU; without it the model-parallel group (tp x pp ranks).
  const std::vector<std::vector<int>> groups = {{0, 1, 4, 5, 8, 9, 12, 13},
                                                {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}};
  for (const int zero : {0, 1}) {
    const StepGraph sg = build_step_graph(model, cluster(16), small_step(zero));
    const TaskGraph& g = sg.graph;
    for (const char* name : {"optimizer.grad_norm.allreduce", "optimizer.found_inf.allreduce"}) {
      const auto ar = g.find(name, -1);
      ASSERT_TRUE(ar.has_value()) << name;
      const auto& w = std::get<CollectiveWork>(g.task(*ar).work);
      EXPECT_EQ(w.op, CollectiveOp::kAllReduce);
      EXPECT_EQ(g.group(w.group), groups[static_cast<std::size_t>(zero)]);
      // One fp32 scalar: at least four bytes in all.
      EXPECT_GE(w.bytes_per_peer * static_cast<std::int64_t>(g.group(w.group).size()), 4);
    }
    const auto ar = *g.find("optimizer.grad_norm.allreduce", -1);
    for (int s = 0; s < 4; ++s) {
      const int rank = sg.shape.stage_rank(s);
      const auto norm = *g.find("stage" + std::to_string(s) + ".bwd.grad_norm", rank);
      const auto clip = *g.find("stage" + std::to_string(s) + ".bwd.clip", rank);
      const auto into = g.predecessors(ar);
      EXPECT_NE(std::find(into.begin(), into.end(), norm), into.end());
      const auto before_clip = g.predecessors(clip);
      EXPECT_NE(std::find(before_clip.begin(), before_clip.end(), ar), before_clip.end());
    }
  }
}

// Without the distributed optimizer, Megatron's dense and expert optimizers reduce their
// statistics over different groups (mp: tp x pp; the experts' tp_ep_pp), each with its own
// all-reduce; with it, one group of every GPU.
TEST(OptimizerStep, ExpertsOverEpReduceTheirNormOverTheirOwnGroupWithoutTheDistributedOptimizer) {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = 2;
  s.layout.pp = 2;
  s.layout.ep = 4;
  s.global_batch = 16;
  s.seq = 1024;
  const ModelSpec model = preset("qwen3-30b-a3b");
  const StepGraph zero0 = build_step_graph(model, cluster(16), s);
  const auto dense = zero0.graph.find("optimizer.grad_norm.allreduce", -1);
  const auto experts = zero0.graph.find("optimizer.grad_norm.experts.allreduce", -1);
  ASSERT_TRUE(dense && experts);
  EXPECT_EQ(zero0.graph.group(std::get<CollectiveWork>(zero0.graph.task(*dense).work).group),
            (std::vector<int>{0, 1, 8, 9}));
  EXPECT_EQ(zero0.graph.group(std::get<CollectiveWork>(zero0.graph.task(*experts).work).group).size(), 16u);
  s.zero_stage = 1;
  const StepGraph zero1 = build_step_graph(model, cluster(16), s);
  EXPECT_TRUE(zero1.graph.find("optimizer.grad_norm.allreduce", -1).has_value());
  EXPECT_FALSE(zero1.graph.find("optimizer.grad_norm.experts.allreduce", -1).has_value());
}

TEST(OptimizerStep, Bf16HasNoLossScalingAndFp32NoCopyToTheModel) {
  ModelSpec bf16 = preset("gpt-1.7b");
  bf16.dtype = DType::kBf16;
  bf16.gemm_dtype = DType::kBf16;
  const StepGraph a = build_step_graph(bf16, cluster(16), small_step(1));
  EXPECT_FALSE(a.graph.find("stage0.bwd.unscale", 0).has_value());
  EXPECT_FALSE(a.graph.find("optimizer.found_inf.allreduce", -1).has_value());
  EXPECT_TRUE(a.graph.find("stage0.bwd.copy_main_to_model", 0).has_value());
  ModelSpec fp32 = preset("gpt-1.7b");
  fp32.dtype = DType::kFp32;
  fp32.gemm_dtype = DType::kFp32;
  const StepGraph b = build_step_graph(fp32, cluster(16), small_step(1));
  EXPECT_FALSE(b.graph.find("stage0.bwd.copy_main_to_model", 0).has_value());
  EXPECT_TRUE(b.graph.find("stage0.bwd.adam", 0).has_value());
}

// One stage, one microbatch, no recomputation: GPT-1.7B over dp 8. The forward of layer l holds
// its gathered weights and layer l + 1's (prefetched when l's pass starts); the head's passes
// only the last layer's backward copy; the backward of layer l its own gathered weights W (one
// layer in fp16) and, from its first task to the end of their reduce-scatter, its whole fp32
// gradients 2W. The head's activations are freed before layer 23's backward begins, so the peak
// is there: the embedding's and every layer's kept activations, W and 2W, and the whole fp32
// gradients of the embedding table, positions and final norm (R), written from the head's backward
// on (the tied table) and reduce-scattered once after the backward.
TEST(OptimizerStep, ZeroThreePeakHoldsTheGatheredWeightsAndTheUnshardedGradients) {
  const ModelSpec model = preset("gpt-1.7b");
  const LayerParameters p = layer_parameters(model, 0);
  const std::int64_t w = 2 * (p.attention + p.norms + p.dense_mlp + p.shared_experts + p.router + p.routed_experts);
  const ParameterCount c = count_parameters(model);
  const std::int64_t rest = 4 * (c.embedding + c.positions + model_norm_parameters(model));
  for (const std::int64_t seq : {1024, 256}) {
    SCOPED_TRACE("seq " + std::to_string(seq));
    StepSpec spec;
    spec.layout.gpus = 8;
    spec.global_batch = 8;
    spec.seq = seq;
    spec.zero_stage = 3;
    const SimulatedStep three = simulate_training_step(model, cluster(8), spec);
    const ActivationLayout layout = activation_layout(three.report.shape, spec);
    const std::int64_t embed = embedding_activations(model, layout);
    const std::int64_t head = output_activations(model, layout);
    const std::int64_t layer = layer_activations(model, layout, 1, 0).kept_bytes;
    ASSERT_LT(head, 2 * w);  // 219 MB at 1,024 tokens, 55 MB at 256: less than the gradients
    const std::int64_t states = three.report.stages[0].model_state_bytes;
    EXPECT_EQ(three.report.stages[0].peak_memory_bytes, states + embed + 24 * layer + w + 2 * w + rest);
    // ZeRO 2 (whole weights resident, nothing gathered): at least layer 23's gradients and layer
    // 22's, allocated while layer 23's reduce-scatter (255 MB over 8 ranks) still runs; at 256
    // tokens the layers' backward passes are shorter than their reduce-scatters, which queue on
    // the gradient stream with every waiting layer's gradients (no bucket bounds them).
    spec.zero_stage = 2;
    const SimulatedStep two = simulate_training_step(model, cluster(8), spec);
    const std::int64_t two_layers = two.report.stages[0].model_state_bytes + embed + 23 * layer + 2 * (2 * w) + rest;
    if (seq == 1024) EXPECT_EQ(two.report.stages[0].peak_memory_bytes, two_layers);
    else EXPECT_GT(two.report.stages[0].peak_memory_bytes, two_layers + 8 * (2 * w));
  }
}

}  // namespace
}  // namespace moesim
