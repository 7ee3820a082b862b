// MPipeMoE's memory reuse in the whole step (--strategy s1-s4, sim/step/moe_mlp_reuse.cc): the
// MoE layers keep neither T_DI nor T_M, each chunk's come back before its expert backward by the
// strategy's means, into buffers that end with that backward; none is today's step, task for task.
// Qwen3-30B-A3B on 16 A100s (tp 2 without sequence parallelism, pp 2, ep 4; testing::small_moe_step), 2
// chunks; with sequence parallelism each rank routes its own shard and the experts restore the
// rows they gathered.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/graph/graph_algorithms.h"
#include "sim/memory/activations.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

StepSpec with(MemoryStrategy strategy, int chunks = 2) {
  StepSpec s = testing::small_moe_step();
  s.sequence_parallel = false;
  s.moe_chunks = chunks;
  s.moe_strategy = strategy;
  return s;
}

SimulatedStep simulate(const StepSpec& s) {
  return simulate_training_step(testing::model_preset("qwen3-30b-a3b"), testing::a100_cluster(16), s);
}

int count_tasks(const TaskGraph& g, const std::string& part) {
  int n = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) n += g.task(i).id.find(part) != std::string::npos ? 1 : 0;
  return n;
}

bool depends(const TaskGraph& g, TaskIndex before, TaskIndex after) {
  bool found = false;
  g.for_each_successor(before, [&](TaskIndex s) { found |= s == after; });
  return found;
}

// The layer's kept bytes lose exactly T_DI and T_M (rows E x C of d_model, and of fc1's output
// plus the activation's per tensor-parallel rank).
TEST(MoeReuse, TheLayerKeepsNeitherTheDispatchedRowsNorTheHiddenColumns) {
  const ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  ActivationLayout l;
  l.seq = 512;
  l.tp = 2;
  const std::int64_t none = moe_layer_activations(model, l, 4).kept_bytes;
  const MoeReusedTensors t = moe_reused_tensors(model, l);
  // 512 tokens x top-8 / 128 experts: C = 32 rows per expert, 4,096 rows; d 2,048, d_ffn 768 (swiglu).
  EXPECT_EQ(t.t_di, 4096LL * 2048 * 2);
  EXPECT_EQ(t.t_m, 4096LL * (2 * 768 + 768) / 2 * 2);
  for (MemoryStrategy s : {MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3, MemoryStrategy::kS4}) {
    l.moe_strategy = s;
    EXPECT_EQ(moe_layer_activations(model, l, 4).kept_bytes, none - t.t_di - t.t_m) << to_string(s);
  }
}

TEST(MoeReuse, EachStrategyRestoresByItsOwnMeansBeforeTheExpertsBackward) {
  const SimulatedStep base = simulate(with(MemoryStrategy::kNone));
  EXPECT_EQ(count_tasks(base.graph.graph, ".offload."), 0);
  // 48 layers over 2 stages x 2 microbatches x 2 chunks on each stage's rank: 192 per tensor.
  const int per_tensor = 48 * 2 * 2;
  struct Expect {
    MemoryStrategy strategy;
    int offload_di, offload_m, prefetch_di, prefetch_m, redispatch, recompute_fc1;
  };
  const Expect cases[] = {
      {MemoryStrategy::kS1, 1, 1, 1, 1, 0, 0},
      {MemoryStrategy::kS2, 0, 1, 0, 1, 1, 0},
      {MemoryStrategy::kS3, 1, 0, 1, 0, 0, 1},
      {MemoryStrategy::kS4, 0, 0, 0, 0, 1, 1},
  };
  for (const Expect& c : cases) {
    SCOPED_TRACE(std::string(to_string(c.strategy)));
    const SimulatedStep sim = simulate(with(c.strategy));
    const TaskGraph& g = sim.graph.graph;
    EXPECT_EQ(count_tasks(g, "experts.offload.T_DI"), c.offload_di * per_tensor);
    EXPECT_EQ(count_tasks(g, "experts.offload.T_M"), c.offload_m * per_tensor);
    EXPECT_EQ(count_tasks(g, "experts.prefetch.T_DI"), c.prefetch_di * per_tensor);
    EXPECT_EQ(count_tasks(g, "experts.prefetch.T_M"), c.prefetch_m * per_tensor);
    // The re-dispatch is an all-to-all over the expert-parallel group (one task per group).
    EXPECT_EQ(count_tasks(g, ".redispatch.c") > 0, c.redispatch == 1);
    EXPECT_EQ(count_tasks(g, "recompute.experts.fc1"), c.recompute_fc1 * per_tensor);
    // Layer 5, microbatch 1, chunk 1 on stage 0's rank: the copies' directions and order.
    const int rank = 0;
    if (c.offload_di) {
      const TaskIndex off = *g.find("mb1.L5.fwd.experts.offload.T_DI.c1", rank);
      const TaskIndex pre = *g.find("mb1.L5.bwd.experts.prefetch.T_DI.c1", rank);
      EXPECT_EQ(std::get<CopyWork>(g.task(off).work).direction, CopyDirection::kDeviceToHost);
      EXPECT_EQ(std::get<CopyWork>(g.task(pre).work).direction, CopyDirection::kHostToDevice);
      EXPECT_TRUE(depends(g, *g.find("mb1.L5.fwd.experts.fc1.c1", rank), off));
      EXPECT_TRUE(depends(g, off, pre));
      EXPECT_LE(sim.run.trace.records[off].end_ns, sim.run.trace.records[pre].start_ns);
    }
    // The restored tensors are buffers: allocated by their restore, freed when the chunk's expert
    // backward ends, and every restore ends before the chunk's input-gradient GEMM starts.
    int restored = 0;
    for (BufferId b = 0; b < g.num_buffers(); ++b) {
      if (g.buffer(b).name.find(".restored.") == std::string::npos) continue;
      ++restored;
      TaskIndex alloc = 0, freed = 0;
      for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
        const Task& t = g.task(i);
        if (std::find(t.allocates.begin(), t.allocates.end(), b) != t.allocates.end()) alloc = i;
        if (std::find(t.frees.begin(), t.frees.end(), b) != t.frees.end()) freed = i;
      }
      EXPECT_LE(sim.run.trace.records[alloc].end_ns, sim.run.trace.records[freed].start_ns) << g.buffer(b).name;
      // The chunk's last expert-backward task: fc1's weight gradient, the last reader of T_DI.
      EXPECT_NE(g.task(freed).id.find(".bwd.experts.fc1.wgrad"), std::string::npos) << g.task(freed).id;
    }
    EXPECT_EQ(restored, 2 * per_tensor);
    // Less memory, more time than keeping them.
    EXPECT_LT(sim.report.peak_memory_bytes, base.report.peak_memory_bytes);
    EXPECT_GT(sim.report.step_ns, base.report.step_ns);
  }
}

// Ranks that route their own shard (tp 2 with sequence parallelism, etp = tp): T_DI and T_M are
// the rows the experts all-gathered over etp (2 x 256 tokens x 8 / 128 x 128 = 4,096 rows of the
// closed form's count), dropped from the layer's kept bytes; a re-dispatch all-gathers them again
// after its all-to-all, before the chunk's expert backward.
TEST(MoeReuse, RanksRoutingTheirOwnShardRestoreTheGatheredRows) {
  const ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  ActivationLayout l;
  l.seq = 512;
  l.tp = 2;
  l.sequence_parallel = true;
  const std::int64_t none = moe_layer_activations(model, l, 4).kept_bytes;
  const MoeReusedTensors t = moe_reused_tensors(model, l);
  EXPECT_EQ(t.t_di, 4096LL * 2048 * 2);
  EXPECT_EQ(t.t_m, 4096LL * (2 * 768 + 768) / 2 * 2);
  l.moe_strategy = MemoryStrategy::kS4;
  EXPECT_EQ(moe_layer_activations(model, l, 4).kept_bytes, none - t.t_di - t.t_m);

  StepSpec base = with(MemoryStrategy::kNone);
  base.sequence_parallel = true;
  StepSpec s2 = base;
  s2.moe_strategy = MemoryStrategy::kS2;
  const SimulatedStep kept = simulate(base);
  const SimulatedStep sim = simulate(s2);
  const TaskGraph& g = sim.graph.graph;
  // One all-gather per re-dispatch: the 48 layers (24 a stage) x 2 microbatches x 2 chunks.
  EXPECT_EQ(count_tasks(g, "experts.tp.redispatch.allgather"), 48 * 2 * 2);
  const TaskIndex gather = *g.find("mb1.L5.bwd.experts.tp.redispatch.allgather.c1", -1);
  const auto& work = std::get<CollectiveWork>(g.task(gather).work);
  EXPECT_EQ(work.op, CollectiveOp::kAllGather);
  EXPECT_EQ(g.group(work.group), (std::vector<int>{0, 1}));
  EXPECT_TRUE(depends(g, *g.find("mb1.L5.bwd.redispatch.c1", -1), gather));
  EXPECT_LT(sim.report.peak_memory_bytes, kept.report.peak_memory_bytes);
  EXPECT_GT(sim.report.step_ns, kept.report.step_ns);
  // Folded experts (etp 1): nothing to gather, the all-to-all restores T_DI alone.
  StepSpec folded = s2;
  folded.layout.etp = 1;
  const SimulatedStep f = simulate(folded);
  EXPECT_EQ(count_tasks(f.graph.graph, "experts.tp.redispatch.allgather"), 0);
  EXPECT_GT(count_tasks(f.graph.graph, ".redispatch.c"), 0);
}


// A split backward (zb-h1, dualpipe) restores twice: before each chunk's input gradients (B) what
// they read (T_M's fc1-output columns; T_DI only to recompute them, s3 and s4), freed by the
// chunk's fc1 input gradient, and again (".w") before the layer's weight gradients (W) T_DI and
// the activation's output, freed by the experts' fc1 weight gradient over every chunk's rows.
// DualPipe mixes split and whole backward passes; a whole one restores once, everything. Every
// restored buffer is allocated by a task its freeing task depends on. Less memory than keeping them.
TEST(MoeReuse, ASplitBackwardRestoresWhatEachPassReads) {
  for (PipelineSchedule schedule : {PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipe}) {
    for (MemoryStrategy strategy : {MemoryStrategy::kS1, MemoryStrategy::kS4}) {
      SCOPED_TRACE(std::string(to_string(schedule)) + " " + std::string(to_string(strategy)));
      StepSpec split = with(strategy);
      split.schedule = schedule;
      if (schedule == PipelineSchedule::kDualPipe) split.global_batch *= 2;  // DualPipe: 2 x stages microbatches
      const SimulatedStep sim = simulate(split);
      const TaskGraph& g = sim.graph.graph;
      int input_di = 0, input_m = 0, weight_di = 0, weight_m = 0;
      for (BufferId b = 0; b < g.num_buffers(); ++b) {
        const std::string& name = g.buffer(b).name;
        if (name.find(".restored.") == std::string::npos) continue;
        TaskIndex alloc = 0, freed = 0;
        for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
          const Task& t = g.task(i);
          if (std::find(t.allocates.begin(), t.allocates.end(), b) != t.allocates.end()) alloc = i;
          if (std::find(t.frees.begin(), t.frees.end(), b) != t.frees.end()) freed = i;
        }
        EXPECT_TRUE(has_path(g, alloc, freed)) << name;
        const std::string& id = g.task(freed).id;
        EXPECT_EQ(id.substr(0, id.find(".bwd")), name.substr(0, name.find(".restored")));
        const bool weight = name.find(".w.") != std::string::npos;
        const bool di = name.find("T_DI") != std::string::npos;
        if (id.find(".bwd.experts.fc1.dgrad") != std::string::npos) {
          ++(di ? input_di : input_m);
        } else {
          EXPECT_NE(id.find(".bwd.experts.fc1.wgrad"), std::string::npos) << name << " " << id;
          if (weight) ++(di ? weight_di : weight_m);
        }
      }
      // zb-h1 splits every backward; DualPipe some.
      EXPECT_GT(weight_di, 0);
      EXPECT_EQ(weight_m, weight_di);
      EXPECT_EQ(input_m, weight_m);
      EXPECT_EQ(input_di, strategy == MemoryStrategy::kS1 ? 0 : input_m);
      StepSpec keep = split;
      keep.moe_strategy = MemoryStrategy::kNone;
      EXPECT_LT(sim.report.peak_memory_bytes, simulate(keep).report.peak_memory_bytes);
    }
  }
}

// ZeRO 2 with a split backward: a layer's unsharded gradients are allocated at its weight pass's
// first GEMM, after the tensors memory reuse restores for that pass (not at the restore). (The
// embedding's and the head's start at their passes' first task, whatever it is.)
TEST(MoeReuse, ZeroTwoGradientsStartAtTheWeightPassesFirstGemm) {
  StepSpec zb = with(MemoryStrategy::kS1);
  zb.schedule = PipelineSchedule::kZeroBubbleH1;
  zb.zero_stage = 2;
  const SimulatedStep sim = simulate(zb);
  const TaskGraph& g = sim.graph.graph;
  int checked = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    for (BufferId b : g.task(i).allocates) {
      const std::string& name = g.buffer(b).name;  // a layer's (".L<n>."), not the model ends'
      if (!name.ends_with(".unsharded") || name.find(".L") == std::string::npos) continue;
      EXPECT_TRUE(std::holds_alternative<GemmWork>(g.task(i).work)) << g.buffer(b).name << " at " << g.task(i).id;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(MoeReuse, RefusesWhatItDoesNotRestore) {
  StepSpec full = with(MemoryStrategy::kS1);
  full.recompute = Recompute::kFull;
  EXPECT_NE(testing::step_error_of(full, "qwen3-30b-a3b").find("--strategy s1 restores the experts' tensors that "
                                                                "--recompute full already recomputes"),
            std::string::npos);
  StepSpec dense = testing::small_gpt_step();
  dense.moe_strategy = MemoryStrategy::kS2;
  EXPECT_NE(testing::step_error_of(dense).find("--strategy s2 reuses the MoE layers' buffers; GPT-1.7B has none"),
            std::string::npos);
}

}  // namespace
}  // namespace moesim
