// ZeRO 2-3's unsharded gradients in the step's memory (sim/step/step_gradients.cc): each layer's
// whole gradients exist from its backward until the reduce-scatter has left each rank its shard,
// which is all the model states count of them. GPT-1.7B (24 layers, d 2,304, d_ffn 9,216, biases,
// layer norms) on 16 A100s: tp 2, pp 4, dp 2 (testing::small_gpt_step).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr std::int64_t kD = 2304, kFfn = 9216, kTp = 2;
// One layer's parameters on one GPU, by hand: attention (QKV and output projections, 4d^2, the
// QKV biases 3d) and MLP (fc1, fc2, 2 d d_ffn, fc1's bias d_ffn) over tp; on every rank the two
// row-parallel output biases (2d, added after the reduction, as Megatron-LM keeps them) and the
// two layer norms (weight and bias, 4d).
constexpr std::int64_t kLayerParams = (4 * kD * kD + 3 * kD + 2 * kD * kFfn + kFfn) / kTp + 2 * kD + 4 * kD;
static_assert(kLayerParams == 31'872'384);
constexpr std::int64_t kVocab = 51200, kSeqPositions = 2048;

SimulatedStep simulate(int zero, std::optional<PipelineSchedule> schedule = std::nullopt) {
  StepSpec s = testing::small_gpt_step();
  s.zero_stage = zero;
  if (schedule) s.schedule = *schedule;
  return simulate_training_step(testing::model_preset("gpt-1.7b"), testing::a100_cluster(16), s);
}

// The task that allocates / frees buffer `b` (the graph allows one of each).
std::optional<TaskIndex> user_of(const TaskGraph& g, BufferId b, bool allocates) {
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const auto& list = allocates ? g.task(i).allocates : g.task(i).frees;
    if (std::find(list.begin(), list.end(), b) != list.end()) return i;
  }
  return std::nullopt;
}

std::vector<BufferId> unsharded(const TaskGraph& g) {
  std::vector<BufferId> out;
  for (BufferId b = 0; b < g.num_buffers(); ++b)
    if (g.buffer(b).name.ends_with(".grad.unsharded")) out.push_back(b);
  return out;
}

TEST(ZeroGradients, EachMicrobatchsLayerHoldsItsWholeGradientsUntilTheirReduceScatterEnds) {
  for (int zero : {2, 3}) {
    SCOPED_TRACE("ZeRO " + std::to_string(zero));
    const SimulatedStep sim = simulate(zero);
    const TaskGraph& g = sim.graph.graph;
    const std::vector<BufferId> grads = unsharded(g);
    // 24 layers x 8 microbatches per pipeline, each on its stage's rank.
    ASSERT_EQ(grads.size(), 24u * 8);
    for (BufferId b : grads) {
      const Buffer& buf = g.buffer(b);
      EXPECT_EQ(buf.bytes, 4 * kLayerParams) << buf.name;  // fp32 main gradients
      EXPECT_EQ(buf.category, MemoryCategory::kTemporary);
      const auto from = user_of(g, b, true), to = user_of(g, b, false);
      ASSERT_TRUE(from && to) << buf.name;
      // Allocated by the layer's first backward task, freed by its gradients' reduce-scatter.
      const std::string layer = buf.name.substr(0, buf.name.find(".grad.unsharded"));  // "mb3.L17"
      EXPECT_TRUE(g.task(*from).id.starts_with(layer + ".bwd.")) << g.task(*from).id;
      EXPECT_EQ(g.task(*to).id, layer + ".bwd.grad.reduce");
      EXPECT_EQ(std::get<CollectiveWork>(g.task(*to).work).op, CollectiveOp::kReduceScatter);
      // And the simulation keeps them apart: the buffer lives from the one's start to the other's end.
      EXPECT_LE(sim.run.trace.records[*from].start_ns, sim.run.trace.records[*to].end_ns);
    }
  }
}

// What the per-layer reductions leave, reduced once after the backward: stage 0's embedding table
// (its tp slice) and learned positions (whole on each rank), stage 3's copy of the tied table for
// the head and the final layer norm (2d). Their whole fp32 gradients live from the first task that
// writes them, the first microbatch's head or embedding backward, to that reduce-scatter's end.
TEST(ZeroGradients, TheEmbeddingAndHeadGradientsStayWholeUntilTheStagesLastReduceScatter) {
  for (int zero : {2, 3}) {
    SCOPED_TRACE("ZeRO " + std::to_string(zero));
    const SimulatedStep sim = simulate(zero);
    const TaskGraph& g = sim.graph.graph;
    const std::pair<int, std::int64_t> expected[] = {{0, kVocab * kD / kTp + kSeqPositions * kD},
                                                     {3, kVocab * kD / kTp + 2 * kD}};
    for (const auto& [stage, params] : expected) {
      const std::string name = "stage" + std::to_string(stage) + ".grad.reduce";
      std::optional<BufferId> found;
      for (BufferId b = 0; b < g.num_buffers(); ++b)
        if (g.buffer(b).name == name + ".unsharded") found = b;
      ASSERT_TRUE(found) << name;
      EXPECT_EQ(g.buffer(*found).bytes, 4 * params);
      const auto from = user_of(g, *found, true), to = user_of(g, *found, false);
      ASSERT_TRUE(from && to);
      EXPECT_TRUE(g.task(*from).id.starts_with(stage == 0 ? "mb0.embed.bwd." : "mb0.head.bwd."))
          << g.task(*from).id;
      EXPECT_EQ(g.task(*to).id, "stage" + std::to_string(stage) + ".bwd.grad.reduce");
      EXPECT_EQ(std::get<CollectiveWork>(g.task(*to).work).op, CollectiveOp::kReduceScatter);
    }
    // The middle stages' layers are all reduced per layer: nothing is left for them.
    for (BufferId b = 0; b < g.num_buffers(); ++b)
      EXPECT_FALSE(g.buffer(b).name.starts_with("stage1.") || g.buffer(b).name.starts_with("stage2.")) << g.buffer(b).name;
  }
}

// ZB-H1 splits the backward: the embedding's gradients are written in the B pass (the W pass has
// none of them), and the head's final norm's too; the ends' buffers exist all the same.
TEST(ZeroGradients, ASplitBackwardHoldsTheEndsWholeGradientsToo) {
  const SimulatedStep sim = simulate(2, PipelineSchedule::kZeroBubbleH1);
  const TaskGraph& g = sim.graph.graph;
  for (const char* name : {"stage0.grad.reduce.unsharded", "stage3.grad.reduce.unsharded"}) {
    std::optional<BufferId> found;
    for (BufferId b = 0; b < g.num_buffers(); ++b)
      if (g.buffer(b).name == name) found = b;
    ASSERT_TRUE(found) << name;
    ASSERT_TRUE(user_of(g, *found, true) && user_of(g, *found, false)) << name;
  }
}

// DualPipe reduces a layer's two copies once, after the step's last microbatch: with ZeRO 2 each
// copy's whole fp32 gradients are a buffer on its stage from its first weight-gradient task to that
// one reduce-scatter (on top of the shard the model states count: more than ZeRO 1 holds), and so
// are the ends' on both end stages.
TEST(ZeroGradients, DualPipeHoldsEachCopysWholeGradientsUntilTheOneReduceScatter) {
  const SimulatedStep sim = simulate(2, PipelineSchedule::kDualPipe);
  const TaskGraph& g = sim.graph.graph;
  int layer_buffers = 0, end_buffers = 0;
  for (BufferId b = 0; b < g.num_buffers(); ++b) {
    const Buffer& buf = g.buffer(b);
    if (!buf.name.ends_with(".unsharded")) continue;
    const auto from = user_of(g, b, true), to = user_of(g, b, false);
    ASSERT_TRUE(from && to) << buf.name;
    EXPECT_EQ(std::get<CollectiveWork>(g.task(*to).work).op, CollectiveOp::kReduceScatter) << buf.name;
    if (buf.name.ends_with(".grad.reduce.unsharded")) {  // stage0 and stage3: the embedding and head
      ++end_buffers;
      continue;
    }
    ++layer_buffers;
    EXPECT_EQ(buf.bytes, 4 * kLayerParams) << buf.name;
    // "stage2.L17.grad.unsharded": written first by a backward task of L17, freed by L17's reduction.
    const std::string layer = buf.name.substr(buf.name.find(".L") + 1, buf.name.find(".grad") - buf.name.find(".L") - 1);
    EXPECT_NE(g.task(*from).id.find("." + layer + ".bwd."), std::string::npos) << buf.name << " " << g.task(*from).id;
    EXPECT_TRUE(g.task(*to).id.ends_with(layer + ".bwd.grad.reduce")) << buf.name << " " << g.task(*to).id;
    EXPECT_LE(sim.run.trace.records[*from].start_ns, sim.run.trace.records[*to].end_ns);
  }
  EXPECT_EQ(layer_buffers, 2 * 24);  // each layer's two copies
  EXPECT_EQ(end_buffers, 2);         // the ends' (embedding, head, final norm) on each end stage
  const SimulatedStep zero1 = simulate(1, PipelineSchedule::kDualPipe);
  EXPECT_GT(sim.report.stages[0].peak_memory_bytes, zero1.report.stages[0].peak_memory_bytes);
}

TEST(ZeroGradients, ZeroOneKeepsItsWholeGradientBufferInTheModelStatesAndNoTransientCopy) {
  const SimulatedStep one = simulate(1);
  EXPECT_TRUE(unsharded(one.graph.graph).empty());
  for (BufferId b = 0; b < one.graph.graph.num_buffers(); ++b)
    EXPECT_FALSE(one.graph.graph.buffer(b).name.ends_with(".unsharded")) << one.graph.graph.buffer(b).name;
  // ZeRO-2's model states hold a shard of the gradients where ZeRO-1's hold them whole: stage 1
  // (6 layers, no embedding or head) saves half its layers' fp32 gradients over dp 2.
  const SimulatedStep two = simulate(2);
  EXPECT_EQ(one.report.stages[1].model_state_bytes - two.report.stages[1].model_state_bytes,
            6 * 4 * kLayerParams / 2);
}

}  // namespace
}  // namespace moesim
