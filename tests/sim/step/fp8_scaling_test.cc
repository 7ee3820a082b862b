// FP8's scaling recipes in the whole step (--fp8-recipe): current scaling's amax pass, amax
// all-reduce and scale kernel before each cast (Transformer Engine's Float8CurrentScalingQuantizer),
// and delayed scaling's bulk update of the amax histories after each model part's forward and
// backward (sim/step/fp8_scaling.h). GPT-1.7B (fp16 storage, 24 layers, hidden 2,304, MLP 9,216,
// 24 heads of 96) on 16 H100s: tp 2, pp 4, dp 2, 8 microbatches of 1,024 tokens.
#include <gtest/gtest.h>

#include <string>

#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

SimulatedStep simulate(Fp8Recipe recipe, bool sequence_parallel = false) {
  StepSpec s = testing::small_gpt_step();
  s.gemm_precision = DType::kFp8;
  s.fp8_recipe = recipe;
  s.sequence_parallel = sequence_parallel;
  return simulate_training_step(testing::model_preset("gpt-1.7b"), testing::cluster_preset("dgx-h100-ndr", 16), s);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Tasks whose id ends with `tail`: stage 0's kernels, or (all_stages) every task, collectives too.
int count_ending(const TaskGraph& g, const std::string& tail, bool all_stages = false) {
  int n = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i)
    n += (all_stages || g.task(i).rank == 0) && ends_with(g.task(i).id, tail);
  return n;
}

const Task& task(const TaskGraph& g, const std::string& id) {
  for (TaskIndex i = 0; i < g.num_tasks(); ++i)
    if (g.task(i).id == id) return g.task(i);
  throw std::runtime_error("no task " + id);
}

constexpr std::int64_t kHidden = 2304, kFfn = 9216, kTokens = 1024, kTp = 2, kLayersPerStage = 6,
                       kMicrobatches = 8, kBytes = 2;  // fp16

TEST(Fp8Scaling, CurrentScalingReadsEachTensorForItsAmaxUnlessTheNormComputedIt) {
  const SimulatedStep sim = simulate(Fp8Recipe::kCurrent);
  const TaskGraph& g = sim.graph.graph;
  // qkv's and fc1's inputs come from TE's layer norm, which returns their amax: only proj's and
  // fc2's inputs get a pass of their own; every output gradient and every weight does.
  EXPECT_EQ(count_ending(g, ".fp8.input.amax"), 2 * kLayersPerStage * kMicrobatches);
  EXPECT_EQ(count_ending(g, ".qkv.fp8.input.amax"), 0);
  EXPECT_EQ(count_ending(g, ".fc1.fp8.input.amax"), 0);
  EXPECT_EQ(count_ending(g, ".fp8.grad.amax"), 4 * kLayersPerStage * kMicrobatches);
  EXPECT_EQ(count_ending(g, ".fp8.weight.amax"), 4 * kLayersPerStage);
  // A scale kernel per quantisation, fused amax or not.
  EXPECT_EQ(count_ending(g, ".fp8.input.scale"), 4 * kLayersPerStage * kMicrobatches);
  EXPECT_EQ(count_ending(g, ".fp8.grad.scale"), 4 * kLayersPerStage * kMicrobatches);
  EXPECT_EQ(count_ending(g, ".fp8.weight.scale"), 4 * kLayersPerStage);
  // Without sequence parallelism nothing is reduced; no history is updated.
  EXPECT_EQ(count_ending(g, ".amax.allreduce", true), 0);
  EXPECT_EQ(count_ending(g, ".fp8.amax.update"), 0);

  // proj's input: tokens x (24 heads / tp x 96) in fp16, one fp32 amax written.
  const auto& proj = std::get<ElementwiseWork>(task(g, "mb1.L0.fwd.proj.fp8.input.amax").work);
  EXPECT_EQ(proj.bytes_read, kTokens * (kHidden / kTp) * kBytes);
  EXPECT_EQ(proj.bytes_written, 4);
  // fc1's output gradient: tokens x ffn / tp; fc2's weights: ffn / tp x hidden.
  EXPECT_EQ(std::get<ElementwiseWork>(task(g, "mb1.L0.bwd.fc1.fp8.grad.amax").work).bytes_read,
            kTokens * (kFfn / kTp) * kBytes);
  EXPECT_EQ(std::get<ElementwiseWork>(task(g, "mb0.L0.fwd.fc2.fp8.weight.amax").work).bytes_read,
            (kFfn / kTp) * kHidden * kBytes);
  const auto& scale = std::get<ElementwiseWork>(task(g, "mb1.L0.fwd.proj.fp8.input.scale").work);
  EXPECT_EQ(scale.bytes_read, 4);
  EXPECT_EQ(scale.bytes_written, 4);
  // The amax pass, the scale, then the cast, on the chain.
  const TaskIndex cast = [&] {
    for (TaskIndex i = 0; i < g.num_tasks(); ++i)
      if (g.task(i).id == "mb1.L0.fwd.proj.fp8.input") return i;
    return TaskIndex{0};
  }();
  ASSERT_EQ(g.predecessors(cast).size(), 1u);
  EXPECT_EQ(g.task(g.predecessors(cast)[0]).id, "mb1.L0.fwd.proj.fp8.input.scale");
}

TEST(Fp8Scaling, SequenceParallelismReducesColumnInputsAndRowGradientsOverTheTensorGroup) {
  const SimulatedStep sim = simulate(Fp8Recipe::kCurrent, true);
  const TaskGraph& g = sim.graph.graph;
  // Every layer of the 24, every microbatch: qkv's and fc1's inputs, proj's and fc2's gradients.
  const int per_pass = 24 * kMicrobatches;
  EXPECT_EQ(count_ending(g, ".qkv.fp8.input.amax.allreduce", true), per_pass);
  EXPECT_EQ(count_ending(g, ".fc1.fp8.input.amax.allreduce", true), per_pass);
  EXPECT_EQ(count_ending(g, ".proj.fp8.grad.amax.allreduce", true), per_pass);
  EXPECT_EQ(count_ending(g, ".fc2.fp8.grad.amax.allreduce", true), per_pass);
  EXPECT_EQ(count_ending(g, ".amax.allreduce", true), 4 * per_pass);
  // One fp32 over the 2 tensor-parallel ranks: 2 bytes each.
  const auto& w = std::get<CollectiveWork>(task(g, "mb0.L0.fwd.qkv.fp8.input.amax.allreduce").work);
  EXPECT_EQ(w.op, CollectiveOp::kAllReduce);
  EXPECT_EQ(g.group(w.group).size(), 2u);
  EXPECT_EQ(w.bytes_per_peer, 2);
}

TEST(Fp8Scaling, DelayedScalingUpdatesTheHistoriesAfterEachPartsPasses) {
  const SimulatedStep sim = simulate(Fp8Recipe::kDelayed);
  const TaskGraph& g = sim.graph.graph;
  // The cast records the amax: no pass, no reduction, no scale kernel per quantisation.
  EXPECT_EQ(count_ending(g, ".amax"), 0);
  EXPECT_EQ(count_ending(g, ".scale"), 0);
  EXPECT_EQ(count_ending(g, ".fp8.input"), 4 * kLayersPerStage * kMicrobatches);
  // One update per microbatch after the part's forward and after its backward.
  EXPECT_EQ(count_ending(g, ".fwd.fp8.amax.update"), kMicrobatches);
  EXPECT_EQ(count_ending(g, ".bwd.fp8.amax.update"), kMicrobatches);
  // 6 layers x 4 GEMMs: 72 forward tensors (input, weight, output), 48 backward ones.
  const std::int64_t forward = 6 * 4 * 3, backward = 6 * 4 * 2, history = 1024;
  const auto& update = std::get<ElementwiseWork>(task(g, "mb0.part0.fwd.fp8.amax.update").work);
  EXPECT_EQ(update.bytes_read, forward * (history + 2) * 4);
  EXPECT_EQ(update.bytes_written, forward * (history + 1) * 4);
  EXPECT_EQ(std::get<ElementwiseWork>(task(g, "mb0.part0.bwd.fp8.amax.update").work).bytes_read,
            backward * (history + 2) * 4);
  EXPECT_EQ(std::get<ElementwiseWork>(task(g, "mb0.part0.fwd.fp8.amax.concat").work).bytes_read, forward * 4);
  // The amaxes all-reduced over the stage's 4 ranks (tp 2 x dp 2): 288 bytes, 72 each.
  const auto& reduce = std::get<CollectiveWork>(task(g, "mb0.part0.fwd.fp8.amax.allreduce").work);
  EXPECT_EQ(g.group(reduce.group).size(), 4u);
  EXPECT_EQ(reduce.bytes_per_peer, forward * 4 / 4);
}

TEST(Fp8Scaling, CurrentScalingReadsMoreThanDelayedByTheAmaxPasses) {
  const SimulatedStep current = simulate(Fp8Recipe::kCurrent);
  const SimulatedStep delayed = simulate(Fp8Recipe::kDelayed);
  const auto read_by = [](const TaskGraph& g, const std::string& stage) {
    std::int64_t bytes = 0;
    for (TaskIndex i = 0; i < g.num_tasks(); ++i)
      if (g.task(i).rank == 0 && g.task(i).stage == stage)
        if (const auto* w = std::get_if<ElementwiseWork>(&g.task(i).work)) bytes += w->bytes_read;
    return bytes;
  };
  // Per layer and microbatch: proj's and fc2's inputs, every output gradient, and per layer the
  // weights once; a 4-byte read per scale kernel. Delayed: the histories' updates and concatenations.
  const std::int64_t inputs = kTokens * (kHidden / kTp + kFfn / kTp);
  const std::int64_t grads = kTokens * (3 * kHidden / kTp + kHidden + kFfn / kTp + kHidden);
  const std::int64_t weights = (4 * kHidden * kHidden + 2 * kHidden * kFfn) / kTp;
  const std::int64_t quantisations = 8 * kLayersPerStage * kMicrobatches + 4 * kLayersPerStage;
  const std::int64_t extra = kBytes * (kLayersPerStage * kMicrobatches * (inputs + grads) + kLayersPerStage * weights) +
                             4 * quantisations;
  const std::int64_t updates = kMicrobatches * (72 * (1024 + 2) * 4 + 72 * 4 + 48 * (1024 + 2) * 4 + 48 * 4);
  EXPECT_EQ(read_by(current.graph.graph, "fp8") - (read_by(delayed.graph.graph, "fp8") - updates), extra);
  EXPECT_GT(current.report.step_ns, delayed.report.step_ns);
}

TEST(Fp8Scaling, MoeLayersCountTheirGroupedExpertsAndReduceNoExpertAmax) {
  StepSpec s = testing::small_moe_step();  // Qwen3-30B-A3B: 48 layers, 128 experts over ep 4
  s.gemm_precision = DType::kFp8;
  const ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  const ClusterSpec cluster = testing::cluster_preset("dgx-h100-ndr", 16);
  const SimulatedStep current = simulate_training_step(model, cluster, s);
  const TaskGraph& g = current.graph.graph;
  EXPECT_GT(count_ending(g, ".experts.fc1.fp8.input.amax"), 0);
  EXPECT_EQ(count_ending(g, ".experts.fc1.fp8.input.amax.allreduce", true), 0);
  EXPECT_EQ(count_ending(g, ".experts.fc2.fp8.grad.amax.allreduce", true), 0);
  EXPECT_GT(count_ending(g, ".qkv.fp8.input.amax.allreduce", true), 0);

  s.fp8_recipe = Fp8Recipe::kDelayed;
  const SimulatedStep delayed = simulate_training_step(model, cluster, s);
  // 24 layers a stage, each qkv, proj and a grouped linear of 32 local experts per fc: 66 GEMMs.
  const std::int64_t forward = 24 * 66 * 3;
  EXPECT_EQ(std::get<ElementwiseWork>(task(delayed.graph.graph, "mb0.part0.fwd.fp8.amax.update").work).bytes_read,
            forward * (1024 + 2) * 4);
}

}  // namespace
}  // namespace moesim
