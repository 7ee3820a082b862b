// The MoE layers' own layout (--etp, Megatron-Core's parallel folding): the expert groups as
// Megatron-Core's expert rank generator orders them (tp-ep-dp-pp), the experts' GEMM shapes and
// collectives, their model states, the rules, and etp = tp reproducing the step without it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/memory/activations.h"
#include "sim/memory/model_states.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto& preset = testing::model_preset;
constexpr auto& cluster = testing::a100_cluster;

// Qwen3-30B-A3B (128 experts of d_ffn 768, top 8, hidden 2048) on 16 GPUs: tp 2, ep 8, one stage
// (dp 8), sequences of 512 tokens, one per microbatch, sequence parallel.
StepSpec folded_step(int etp) {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = 2;
  s.layout.ep = 8;
  s.layout.etp = etp;
  s.global_batch = 16;
  s.seq = 512;
  s.sequence_parallel = true;
  return s;
}

// A collective (found with rank -1) or a kernel of stage 0's rank 0.
const Task& task(const TaskGraph& g, const std::string& id) {
  auto i = g.find(id, -1);
  if (!i) i = g.find(id, 0);
  if (!i) throw std::runtime_error("no task " + id);
  return g.task(*i);
}

TEST(ExpertFolding, GroupsFollowMegatronsExpertRankGenerator) {
  // 16 GPUs, tp 2, ep 8, etp 1: expert rank = (d x 8 + e) x 1 + t, so the expert-parallel group
  // of rank 0 is ranks 0..7 (one node), its replica rank 8, and its tensor group itself.
  const StepShape shape = derive_step_shape(preset("qwen3-30b-a3b"), cluster(16), folded_step(1));
  EXPECT_THAT(shape.tensor_group(0), ElementsAre(0, 1));
  EXPECT_THAT(shape.expert_group(0), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(shape.expert_tensor_group(0), ElementsAre(0));
  EXPECT_THAT(shape.expert_data_group(0), ElementsAre(0, 8));
  // Two stages of 16 (32 GPUs, pp 2): stage 1 starts at rank 16.
  StepSpec two = folded_step(1);
  two.layout.gpus = 32;
  two.layout.pp = 2;
  two.global_batch = 32;
  const StepShape staged = derive_step_shape(preset("qwen3-30b-a3b"), cluster(32), two);
  EXPECT_THAT(staged.expert_group(1), ElementsAre(16, 17, 18, 19, 20, 21, 22, 23));
  EXPECT_THAT(staged.expert_data_group(1), ElementsAre(16, 24));
}

TEST(ExpertFolding, DefaultGroupsAreTheExpertTensorParallelEqualToTp) {
  // etp = tp (the default): ep ranks strided by tp inside the data-parallel ones, replicas cp x dp / ep.
  for (int etp : {0, 2}) {
    StepSpec s = folded_step(etp);
    s.layout.ep = 4;
    const StepShape shape = derive_step_shape(preset("qwen3-30b-a3b"), cluster(16), s);
    EXPECT_FALSE(shape.layout.folded());
    EXPECT_THAT(shape.expert_group(0), ElementsAre(0, 2, 4, 6));
    EXPECT_THAT(shape.expert_tensor_group(0), ElementsAre(0, 1));
    EXPECT_THAT(shape.expert_data_group(0), ElementsAre(0, 8));
  }
}

TEST(ExpertFolding, ExpertGemmsAndCollectivesAsTheAllToAllDispatcherRunsThem) {
  const SimulatedStep sim = simulate_training_step(preset("qwen3-30b-a3b"), cluster(16), folded_step(1));
  const TaskGraph& g = sim.graph.graph;
  // Each rank routes its own 512 / 2 = 256 tokens: C = floor(8 x 256 / 128) = 16 rows per expert;
  // a local expert (128 / 8 = 16 of them) gets ep x etp x C = 8 x 1 x 16 = 128 rows, whole columns.
  const auto& fc1 = std::get<GemmWork>(task(g, "mb0.L0.fwd.experts.fc1").work);
  EXPECT_EQ(fc1.batch, 16);
  EXPECT_EQ(fc1.m, 128);
  EXPECT_EQ(fc1.n, 2 * 768);
  EXPECT_EQ(fc1.k, 2048);
  const auto& router = std::get<GemmWork>(task(g, "mb0.L0.fwd.router").work);
  EXPECT_EQ(router.m, 256);
  // The dispatch: 128 x 16 rows of 2,048 bf16 values over ranks 0..7.
  const auto& dispatch = std::get<CollectiveWork>(task(g, "mb0.L0.fwd.dispatch").work);
  EXPECT_THAT(g.group(dispatch.group), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(dispatch.bytes_per_peer * 8, 128 * 16 * 2048 * 2);
  // No block all-gather or reduce-scatter around the routed experts (Qwen3 has no shared ones),
  // and with etp 1 no experts' tensor-parallel collectives.
  EXPECT_FALSE(g.find("mb0.L0.fwd.tp.mlp.allgather", -1).has_value());
  EXPECT_FALSE(g.find("mb0.L0.fwd.tp.mlp.reducescatter", -1).has_value());
  EXPECT_FALSE(g.find("mb0.L0.fwd.experts.tp.allgather", -1).has_value());
  EXPECT_TRUE(g.find("mb0.L0.fwd.tp.attn.allgather", -1).has_value());
}

// The default etp (= tp 2) under sequence parallelism: Megatron-Core's dispatcher over the
// tensor-parallel group. Each rank routes its own 256 tokens (C = 16), sends 128 x 16 rows over
// its 8 expert-parallel ranks (strided by etp 2), and the tensor-parallel pair all-gathers them:
// a local expert gets 8 x 2 x 16 = 256 rows and 2 x 768 / 2 columns. Without sequence
// parallelism every rank routes the pair's 512 tokens after the block's collectives.
TEST(ExpertFolding, TheDefaultEtpUnderSequenceParallelismRunsTheDispatcher) {
  const SimulatedStep sim = simulate_training_step(preset("qwen3-30b-a3b"), cluster(16), folded_step(0));
  const TaskGraph& g = sim.graph.graph;
  EXPECT_EQ(std::get<GemmWork>(task(g, "mb0.L0.fwd.router").work).m, 256);
  const auto& fc1 = std::get<GemmWork>(task(g, "mb0.L0.fwd.experts.fc1").work);
  EXPECT_EQ(fc1.batch, 16);
  EXPECT_EQ(fc1.m, 256);
  EXPECT_EQ(fc1.n, 768);
  const auto& dispatch = std::get<CollectiveWork>(task(g, "mb0.L0.fwd.dispatch").work);
  EXPECT_THAT(g.group(dispatch.group), ElementsAre(0, 2, 4, 6, 8, 10, 12, 14));
  EXPECT_EQ(dispatch.bytes_per_peer * 8, 128 * 16 * 2048 * 2);
  const auto& gather = std::get<CollectiveWork>(task(g, "mb0.L0.fwd.experts.tp.allgather").work);
  EXPECT_THAT(g.group(gather.group), ElementsAre(0, 1));
  EXPECT_EQ(gather.bytes_per_peer * 2, 16 * 256 * 2048 * 2);
  EXPECT_FALSE(g.find("mb0.L0.fwd.tp.mlp.allgather", -1).has_value());

  StepSpec no_sp = folded_step(0);
  no_sp.sequence_parallel = false;
  const SimulatedStep whole = simulate_training_step(preset("qwen3-30b-a3b"), cluster(16), no_sp);
  const TaskGraph& w = whole.graph.graph;
  EXPECT_EQ(std::get<GemmWork>(task(w, "mb0.L0.fwd.router").work).m, 512);
  EXPECT_EQ(std::get<CollectiveWork>(task(w, "mb0.L0.fwd.dispatch").work).bytes_per_peer * 8, 128 * 32 * 2048 * 2);
  EXPECT_FALSE(w.find("mb0.L0.fwd.experts.tp.allgather", -1).has_value());
  EXPECT_TRUE(w.find("mb0.L0.fwd.tp.mlp.allreduce", -1).has_value());
}

TEST(ExpertFolding, ExpertTensorParallelRanksGatherTheirRowsAndSplitTheColumns) {
  // tp 1, etp 2, ep 4 on 16 GPUs: every rank routes its 512 tokens (C = 32); the all-to-all runs
  // over ranks 0, 2, 4, 6, then the etp pair {0, 1} all-gathers: a local expert (32) gets
  // 4 x 2 x 32 = 256 rows and 768 / 2 = 384 columns (swiglu: fc1 out 768).
  StepSpec s = folded_step(2);
  s.layout.tp = 1;
  s.layout.ep = 4;
  s.sequence_parallel = false;
  const SimulatedStep sim = simulate_training_step(preset("qwen3-30b-a3b"), cluster(16), s);
  const TaskGraph& g = sim.graph.graph;
  const auto& fc1 = std::get<GemmWork>(task(g, "mb0.L0.fwd.experts.fc1").work);
  EXPECT_EQ(fc1.batch, 32);
  EXPECT_EQ(fc1.m, 256);
  EXPECT_EQ(fc1.n, 768);
  const auto& dispatch = std::get<CollectiveWork>(task(g, "mb0.L0.fwd.dispatch").work);
  EXPECT_THAT(g.group(dispatch.group), ElementsAre(0, 2, 4, 6));
  const std::int64_t gathered_bytes = 32 * 256 * 2048 * 2;  // local experts x rows x hidden x bf16
  for (const std::string id : {"mb0.L0.fwd.experts.tp.allgather", "mb0.L0.fwd.experts.tp.reducescatter",
                               "mb0.L0.bwd.experts.tp.allgather", "mb0.L0.bwd.experts.tp.reducescatter"}) {
    const auto& w = std::get<CollectiveWork>(task(g, id).work);
    EXPECT_THAT(g.group(w.group), ElementsAre(0, 1)) << id;
    EXPECT_EQ(w.bytes_per_peer * 2, gathered_bytes) << id;
  }
  // The experts' gradients reduce over their 16 / (2 x 4) = 2 replicas, ranks 0 and 8.
  const auto& reduce = std::get<CollectiveWork>(task(g, "mb0.L0.bwd.expert.grad.reduce").work);
  EXPECT_THAT(g.group(reduce.group), ElementsAre(0, 8));
}

TEST(ExpertFolding, ModelStatesShardTheExpertsOverEtpTimesEp) {
  // Qwen3-30B-A3B's routed experts per layer: 128 x 3 x 2048 x 768 = 603,979,776 (swiglu: gate,
  // up, down). tp 2, ep 8, one stage of 16 GPUs: with etp 1 each GPU holds 1/8 of them and the
  // experts have 16 / 8 = 2 replicas; with etp 2 (= tp) 1/16 and 1 replica. The dense states are
  // the same (replicated over the 8 data-parallel ranks).
  const ModelSpec model = preset("qwen3-30b-a3b");
  const TrainingLayout folded{.tp = 2, .pp = 1, .ep = 8, .etp = 1, .dp = 2, .zero_stage = 1};
  const TrainingLayout plain{.tp = 2, .pp = 1, .ep = 8, .etp = 2, .dp = 1, .zero_stage = 1};
  const StageModelStates f = model_states_per_gpu(model, folded)[0];
  const StageModelStates p = model_states_per_gpu(model, plain)[0];
  EXPECT_DOUBLE_EQ(f.expert_params, 48.0 * 603979776 / 8);
  EXPECT_DOUBLE_EQ(p.expert_params, 48.0 * 603979776 / 16);
  EXPECT_DOUBLE_EQ(f.dense_params, p.dense_params);
  // ZeRO 1: optimizer states (12 bytes) sharded over each state's replicas.
  EXPECT_DOUBLE_EQ(f.optimizer_bytes, f.dense_params * 12 / 8 + f.expert_params * 12 / 2);
  EXPECT_DOUBLE_EQ(f.weight_bytes, (f.dense_params + f.expert_params) * 2);
  EXPECT_DOUBLE_EQ(f.grad_bytes, (f.dense_params + f.expert_params) * 4);
}

TEST(ExpertFolding, ActivationsKeepTheGatheredRowsOfTheExpertTensorParallelRanks) {
  // Qwen3-30B-A3B, 512 tokens, tp 2 with sequence parallelism. etp 2 (= tp): the rank's 256
  // tokens give E x C(256) = 2,048 rows, gathered over 2 ranks: 4,096 rows of fc1 input (2,048
  // wide), 4,096 x 2,304 / 2 columns (swiglu's 2 x 768 fc1 output and 768 activation) and its
  // 2,048 own output rows. etp 1: the
  // rank's 256 tokens give 128 x 16 = 2,048 rows (gathered over one rank), whole columns, and its
  // 2,048 own output rows. The rest of the layer is the same: the difference is
  // (2,048 - 4,096) x 2,048 x 2 + (2,048 x 2,304 - 4,096 x 1,152) x 2 + (2,048 - 2,048) x 2,048 x 2.
  const ModelSpec model = preset("qwen3-30b-a3b");
  ActivationLayout plain;
  plain.seq = 512;
  plain.tp = 2;
  plain.sequence_parallel = true;
  ActivationLayout folded = plain;
  folded.etp = 1;
  EXPECT_EQ(moe_layer_activations(model, folded, 8).kept_bytes - moe_layer_activations(model, plain, 8).kept_bytes,
            -2048 * 2048 * 2);
  // The simulated peak is the model states and the closed form's in-flight activations.
  const SimulatedStep sim = simulate_training_step(model, cluster(16), folded_step(1));
  const StageActivations act = stage_activations(model, folded, 8, PipelineLayout{PipelineSchedule::kOneFOneB, 1, 1, 2, {}}, 0);
  EXPECT_EQ(sim.report.stages[0].peak_memory_bytes, sim.report.stages[0].model_state_bytes + act.bytes());
}

TEST(ExpertFolding, EtpEqualToTpReproducesTheStepWithoutIt) {
  StepSpec with = folded_step(2);
  with.layout.ep = 4;
  StepSpec without = with;
  without.layout.etp = 0;
  const SimulatedStep a = simulate_training_step(preset("qwen3-30b-a3b"), cluster(16), with);
  const SimulatedStep b = simulate_training_step(preset("qwen3-30b-a3b"), cluster(16), without);
  ASSERT_EQ(a.graph.graph.num_tasks(), b.graph.graph.num_tasks());
  for (TaskIndex i = 0; i < a.graph.graph.num_tasks(); ++i) ASSERT_EQ(a.graph.graph.task(i).id, b.graph.graph.task(i).id);
  EXPECT_EQ(a.report.step_ns, b.report.step_ns);
  EXPECT_EQ(a.report.peak_memory_bytes, b.report.peak_memory_bytes);
}

TEST(ExpertFolding, RefusesEachRuleNamingEtp) {
  const auto error = [](const StepSpec& s) { return testing::step_error_of(s, "qwen3-30b-a3b"); };
  StepSpec s = folded_step(5);
  EXPECT_THAT(error(s), HasSubstr("--etp 5 does not divide the experts' d_ffn 768"));
  s = folded_step(4);  // 4 x 8 = 32 does not divide the stage's 16 ranks
  EXPECT_THAT(error(s), HasSubstr("--etp x --ep = 32 does not divide the 16 ranks of a pipeline stage"));
  s = folded_step(1);
  s.sequence_parallel = false;
  EXPECT_THAT(error(s), HasSubstr("--etp 1 with --tp 2 needs --sequence-parallel"));
  StepSpec dense = testing::small_gpt_step();
  dense.layout.etp = 1;
  EXPECT_THAT(testing::step_error_of(dense), HasSubstr("--etp 1 needs a model with MoE layers"));
  EXPECT_EQ(error(folded_step(1)), "");
}

}  // namespace
}  // namespace moesim
