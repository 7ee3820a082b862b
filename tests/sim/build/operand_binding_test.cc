// Operand bindings of the MoE block's expert tensors (sim/build/memory_reuse.h, task.h): which
// bytes each expert task reads and writes, and, over every memory-reuse strategy, order policy,
// chunk count, checkpointing mode, TED tensor parallelism, swiglu, shared experts and imbalanced
// routing, that the graph orders every conflicting access and keeps each inside its buffer's life
// (sim/graph/operand_check.h): the proof that the slot reuse edges are enough.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/build/moe_graph.h"
#include "sim/graph/operand_check.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

using moesim::testing::cluster_with_pcie;
using moesim::testing::kAllPolicies;
using moesim::testing::kAllStrategies;
using moesim::testing::small_cluster;
using moesim::testing::small_model;
using moesim::testing::small_run;


const Task& task_named(const TaskGraph& g, const std::string& id) {
  const std::optional<TaskIndex> i = g.find(id, 0);
  if (!i) throw std::runtime_error("no task " + id);
  return g.task(*i);
}

// "name [offset, +bytes)" of each operand.
std::vector<std::string> describe(const TaskGraph& g, const std::vector<Operand>& operands) {
  std::vector<std::string> out;
  for (const Operand& o : operands)
    out.push_back(g.buffer(o.buffer).name + " [" + std::to_string(o.offset) + ", +" + std::to_string(o.bytes) + ")");
  return out;
}

std::string violations_of(const TaskGraph& g) {
  std::string all;
  for (const std::string& v : operand_violations(g)) all += v + "\n";
  return all;
}

TEST(OperandBinding, ChunksTakeTheirSlotOrTheirRowsOfTheFullTensor) {
  // E = 8, C = 24, n = 4: 8 x 6 = 48 rows a chunk, M = 64, F = 128, bf16.
  RunSpec run = small_run(4, OrderPolicy::kSequential);
  const TaskGraph none = build_moe_graph(small_model(), cluster_with_pcie(), run);
  // W1 follows the gate's M x E = 1,024 bytes in params: E_l x M x F = 16,384 bytes.
  EXPECT_THAT(describe(none, task_named(none, "L0.fwd.fc1.c2").reads),
              ::testing::ElementsAre("L0.T_DI [12288, +6144)", "L0.params [1024, +16384)"));
  EXPECT_THAT(describe(none, task_named(none, "L0.fwd.fc1.c2").writes),
              ::testing::ElementsAre("L0.T_M [24576, +12288)"));
  run.strategy = MemoryStrategy::kS1;
  run.slots = 2;
  const TaskGraph s1 = build_moe_graph(small_model(), cluster_with_pcie(), run);
  // Position 3 writes T_DI's slot 3 % 2; the single T_M slot; backward position 1 (chunk 1: the
  // sequential order runs the backward's chunks in the forward's order) continues the sequence
  // at 4 + 1 = 5: slot 1, and takes the gradients' slot 1 % 2.
  EXPECT_THAT(describe(s1, task_named(s1, "L0.fwd.fc1.c3").reads),
              ::testing::ElementsAre("L0.T_DI.slot1 [0, +6144)", "L0.params [1024, +16384)"));
  EXPECT_THAT(describe(s1, task_named(s1, "L0.fwd.fc1.c3").writes), ::testing::ElementsAre("L0.T_M.slot0 [0, +12288)"));
  EXPECT_THAT(describe(s1, task_named(s1, "L0.fwd.offload.T_DI.c3").reads),
              ::testing::ElementsAre("L0.T_DI.slot1 [0, +6144)"));
  EXPECT_THAT(describe(s1, task_named(s1, "L0.bwd.prefetch.T_DI.c1").writes),
              ::testing::ElementsAre("L0.T_DI.slot1 [0, +6144)"));
  EXPECT_THAT(describe(s1, task_named(s1, "L0.bwd.fc1.wgrad.c1").reads),
              ::testing::ElementsAre("L0.T_DI.slot1 [0, +6144)", "L0.dM.slot0 [0, +12288)", "L0.grads [1024, +16384)"));
  // The first chunk in backward order writes the weight gradient; the later ones add to it.
  EXPECT_THAT(describe(s1, task_named(s1, "L0.bwd.fc1.wgrad.c0").writes), ::testing::ElementsAre("L0.grads [1024, +16384)"));
  EXPECT_EQ(task_named(s1, "L0.bwd.fc1.wgrad.c0").reads.size(), 2U);
  EXPECT_THAT(describe(s1, task_named(s1, "L0.bwd.fc1.dgrad.c1").writes),
              ::testing::ElementsAre("L0.dDI.slot1 [0, +6144)"));
  EXPECT_EQ(task_named(s1, "L0.fwd.fc1.c3").reads.front().dtype, DType::kBf16);
}

// The runtime reads a task's operands by position (runtime/exec/lowering.h): every expert task's
// list, in order, for gelu (dA is dM, rewritten in place) and swiglu (its own dA buffer).
TEST(OperandBinding, EachExpertTaskBindsItsOperandsInTheRuntimesOrder) {
  RunSpec run = small_run(2, OrderPolicy::kSequential);
  run.strategy = MemoryStrategy::kS1;
  run.slots = 2;
  ModelSpec swiglu = small_model();
  swiglu.activation = Activation::kSwiglu;
  for (const ModelSpec& model : {small_model(), swiglu}) {
    const TaskGraph g = build_moe_graph(model, cluster_with_pcie(), run);
    const bool own_da = model.activation == Activation::kSwiglu;
    // 96 rows a chunk: T_DO and dDO 64 wide, dA 128 (H), T_M and dM 128 or, swiglu, 256 (2H).
    const std::string d_a = own_da ? "L0.bwd.dA.c1 [0, +24576)" : "L0.dM.slot0 [0, +24576)";
    const std::string t_m = own_da ? "L0.T_M.slot0 [0, +49152)" : "L0.T_M.slot0 [0, +24576)";
    const std::string d_m = own_da ? "L0.dM.slot0 [0, +49152)" : "L0.dM.slot0 [0, +24576)";
    // params: the gate (1,024 bytes), W1 (64 x F), W2 (128 x 64 = 16,384 bytes).
    const std::string w1 = own_da ? "[1024, +32768)" : "[1024, +16384)";
    const std::string w2 = own_da ? "[33792, +16384)" : "[17408, +16384)";
    // Chunk 1: forward position 1; backward position 1, sequence position 3.
    EXPECT_THAT(describe(g, task_named(g, "L0.fwd.act.c1").reads), ::testing::ElementsAre(t_m));
    EXPECT_THAT(describe(g, task_named(g, "L0.fwd.fc2.c1").writes), ::testing::ElementsAre("L0.T_DO.slot1 [0, +12288)"));
    EXPECT_THAT(describe(g, task_named(g, "L0.fwd.fc2.c1").reads), ::testing::ElementsAre(t_m, "L0.params " + w2));
    EXPECT_THAT(describe(g, task_named(g, "L0.bwd.fc2.dgrad.c1").reads),
                ::testing::ElementsAre("L0.dDO.slot1 [0, +12288)", "L0.params " + w2));
    EXPECT_THAT(describe(g, task_named(g, "L0.bwd.fc2.dgrad.c1").writes), ::testing::ElementsAre(d_a));
    EXPECT_THAT(describe(g, task_named(g, "L0.bwd.act.c1").reads), ::testing::ElementsAre(d_a, t_m));
    EXPECT_THAT(describe(g, task_named(g, "L0.bwd.act.c1").writes), ::testing::ElementsAre(d_m));
    EXPECT_THAT(describe(g, task_named(g, "L0.bwd.fc2.wgrad.c1").reads),
                ::testing::ElementsAre(t_m, "L0.dDO.slot1 [0, +12288)", "L0.grads " + w2));
    EXPECT_THAT(describe(g, task_named(g, "L0.bwd.fc2.wgrad.c1").writes), ::testing::ElementsAre("L0.grads " + w2));
    EXPECT_THAT(describe(g, task_named(g, "L0.bwd.fc1.dgrad.c1").reads), ::testing::ElementsAre(d_m, "L0.params " + w1));
    EXPECT_THAT(describe(g, task_named(g, "L0.bwd.prefetch.T_M.c1").writes), ::testing::ElementsAre(t_m));
  }
  // s3 recomputes T_M: the recomputed FC1 reads the prefetched T_DI (sequence position 3), then W1.
  run.strategy = MemoryStrategy::kS3;
  const TaskGraph s3 = build_moe_graph(small_model(), cluster_with_pcie(), run);
  EXPECT_THAT(describe(s3, task_named(s3, "L0.bwd.recompute.fc1.c1").reads),
              ::testing::ElementsAre("L0.T_DI.slot1 [0, +12288)", "L0.params [1024, +16384)"));
  EXPECT_THAT(describe(s3, task_named(s3, "L0.bwd.recompute.fc1.c1").writes),
              ::testing::ElementsAre("L0.T_M.slot0 [0, +24576)"));
}

TEST(OperandBinding, TheAllToAllsBindEachMembersBuffers) {
  RunSpec run = small_run(2);
  run.strategy = MemoryStrategy::kS2;
  const TaskGraph g = build_moe_graph(small_model(), cluster_with_pcie(), run);
  const std::optional<TaskIndex> dispatch = g.find("L0.fwd.dispatch.c0", -1);
  ASSERT_TRUE(dispatch);
  EXPECT_THAT(describe(g, g.task(*dispatch).writes), ::testing::ElementsAre("L0.T_DI.slot0 [0, +12288)"));
  const std::optional<TaskIndex> redispatch = g.find("L0.bwd.redispatch.c1", -1);
  ASSERT_TRUE(redispatch);
  EXPECT_FALSE(g.task(*redispatch).writes.empty());
}

TEST(OperandBinding, EveryStrategyOrdersEveryConflictingAccess) {
  for (MemoryStrategy s : kAllStrategies)
    for (OrderPolicy order : kAllPolicies)
      for (int n : {1, 3, 4})
        for (int slots : {1, 2}) {
          RunSpec run = small_run(n, order);
          run.strategy = s;
          run.slots = slots;
          if (s == MemoryStrategy::kNone && slots > 1) continue;
          const TaskGraph g = build_moe_graph(small_model(), cluster_with_pcie(), run);
          EXPECT_EQ(violations_of(g), "") << to_string(s) << " " << to_string(order) << " n=" << n << " slots=" << slots;
        }
}

TEST(OperandBinding, CheckpointingTedSwigluSharedExpertsAndTwoLayersStaySound) {
  ModelSpec swiglu = small_model();
  swiglu.activation = Activation::kSwiglu;
  swiglu.shared_experts = SharedExpertSpec{1, 64};
  for (const ModelSpec& model : {small_model(), swiglu})
    for (MemoryStrategy s : kAllStrategies)
      for (ActivationCheckpointing ckpt :
           {ActivationCheckpointing::kNone, ActivationCheckpointing::kFull, ActivationCheckpointing::kCommAware})
        for (int tp : {1, 2}) {
          // Checkpointing replaces the strategies (it runs with strategy none only).
          if (ckpt != ActivationCheckpointing::kNone && s != MemoryStrategy::kNone) continue;
          RunSpec run = small_run(3);
          run.strategy = s;
          run.checkpoint = ckpt;
          run.tp_size = tp;
          run.num_moe_layers = 2;
          const TaskGraph g = build_moe_graph(model, cluster_with_pcie(), run);
          EXPECT_EQ(violations_of(g), "")
              << to_string(model.activation) << " " << to_string(s) << " checkpoint " << to_string(ckpt) << " tp " << tp;
        }
}

TEST(OperandBinding, ImbalancedRoutingBindsEachRanksRows) {
  RunSpec run = small_run(3);
  run.strategy = MemoryStrategy::kS3;
  run.slots = 2;
  run.routing.kind = RoutingKind::kZipf;
  run.routing.zipf_exponent = 1.2;
  const TaskGraph g = build_moe_graph(small_model(), cluster_with_pcie(), run);
  ASSERT_GT(g.simulated_ranks().size(), 1U);
  EXPECT_EQ(violations_of(g), "");
  // Each rank's FC1 reads its own T_DI slot, sized by the rows it received in the chunk.
  for (int r : g.simulated_ranks()) {
    const Task& fc1 = g.task(*g.find("L0.fwd.fc1.c0", r));
    ASSERT_EQ(fc1.reads.size(), 2U) << r;  // T_DI, W1
    EXPECT_EQ(g.buffer(fc1.reads[0].buffer).rank, r);
    EXPECT_LE(fc1.reads[0].bytes, g.buffer(fc1.reads[0].buffer).bytes);
  }
}

}  // namespace
}  // namespace moesim
