// Activation checkpointing of MoE layers and DeepSpeed-TED's communication-aware variant (CAC,
// reference section 5): the re-run's tasks, streams and buffers, the all-to-all count (6 per layer
// and step with full checkpointing, 4 with CAC), the stash, and the rules.
//
// Setup (tests/sim/build/test_specs.h): M = 64, H = 128, E = 8, k = 2, f = 1, bf16, B = 96 on
// 8 GPUs; EP 8, C = 24, R = E * C = 192 rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/graph/graph_algorithms.h"
#include "sim/build/moe_graph.h"
#include "tests/sim/build/graph_test_util.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

using ::testing::ElementsAre;
using moesim::testing::expect_rejected;
using moesim::testing::kAllPolicies;
using moesim::testing::predecessor_ids;
using moesim::testing::small_cluster;
using moesim::testing::small_model;
using moesim::testing::small_run;
using moesim::testing::stream_ids;
using moesim::testing::task_at;

RunSpec checkpointed(ActivationCheckpointing mode, int chunks = 2, int tp = 1) {
  RunSpec r = small_run(chunks);
  r.checkpoint = mode;
  r.tp_size = tp;
  return r;
}

int all_to_alls(const TaskGraph& g) {
  int count = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i)
    if (const auto* c = std::get_if<CollectiveWork>(&g.task(i).work); c && c->op == CollectiveOp::kAllToAll) ++count;
  return count;
}

// Buffer (by name) -> the ids of the tasks that allocate and free it on rank 0.
std::pair<std::string, std::string> life_of(const TaskGraph& g, const std::string& name) {
  std::string alloc, free;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Task& t = g.task(i);
    for (BufferId b : t.allocates)
      if (g.buffer(b).name == name && g.buffer(b).rank == 0) alloc = t.id;
    for (BufferId b : t.frees)
      if (g.buffer(b).name == name && g.buffer(b).rank == 0) free = t.id;
  }
  return {alloc, free};
}

TEST(Checkpointing, SixAllToAllsPerLayerAndStepFullFourWithCac) {
  for (int n : {1, 3}) {
    EXPECT_EQ(all_to_alls(build_moe_graph(small_model(), small_cluster(), small_run(n))), 4 * n);
    EXPECT_EQ(all_to_alls(build_moe_graph(small_model(), small_cluster(), checkpointed(ActivationCheckpointing::kFull, n))),
              6 * n);
    EXPECT_EQ(
        all_to_alls(build_moe_graph(small_model(), small_cluster(), checkpointed(ActivationCheckpointing::kCommAware, n))),
        4 * n);
  }
}

TEST(Checkpointing, TheReRunPrecedesTheLayersBackward) {
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), checkpointed(ActivationCheckpointing::kFull));
  const std::vector<std::string> compute = stream_ids(g, 0, StreamClass::kCompute);
  const auto at = [&](const std::string& id) { return std::find(compute.begin(), compute.end(), id) - compute.begin(); };
  EXPECT_LT(at("L0.fwd.decode"), at("L0.bwd.recompute.gate"));
  EXPECT_LT(at("L0.bwd.recompute.decode"), at("L0.bwd.decode"));
  EXPECT_THAT(std::vector<std::string>(compute.begin() + at("L0.bwd.recompute.gate"), compute.begin() + at("L0.bwd.decode")),
              ElementsAre("L0.bwd.recompute.gate", "L0.bwd.recompute.route", "L0.bwd.recompute.encode",
                          "L0.bwd.recompute.fc1.c0", "L0.bwd.recompute.act.c0", "L0.bwd.recompute.fc2.c0",
                          "L0.bwd.recompute.fc1.c1", "L0.bwd.recompute.act.c1", "L0.bwd.recompute.fc2.c1",
                          "L0.bwd.recompute.decode"));
  EXPECT_EQ(task_at(g, "L0.bwd.recompute.fc1.c0").stage, "recompute");
  EXPECT_EQ(task_at(g, "L0.bwd.recompute.fc1.c0").pass, Pass::kBackward);
  EXPECT_EQ(task_at(g, "L0.bwd.recompute.dispatch.c1").stage, "redispatch");
  EXPECT_EQ(task_at(g, "L0.bwd.recompute.combine.c1").stage, "recombine");
  // The re-run's all-to-alls are issued as the forward's (mpipemoe: dispatch and combine streams).
  EXPECT_THAT(stream_ids(g, 0, StreamClass::kCommCombine),
              ElementsAre("L0.fwd.combine.c0", "L0.fwd.combine.c1", "L0.bwd.recompute.combine.c0",
                          "L0.bwd.recompute.combine.c1"));
  EXPECT_TRUE(predecessor_ids(g, "L0.bwd.decode").count("L0.bwd.recompute.decode"));
  EXPECT_NO_THROW(check_acyclic(g));
}

TEST(Checkpointing, ForwardKeepsOnlyTheInputAndTheReRunRecreatesTheRest) {
  RunSpec r = checkpointed(ActivationCheckpointing::kFull, 1);
  r.num_moe_layers = 2;
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), r);
  // Forward activations of a layer die at its decode...
  for (const char* name : {"L0.T_DI", "L0.T_M", "L0.T_DO", "L0.T_O", "L0.scores", "L0.topk"})
    EXPECT_EQ(life_of(g, name).second, "L0.fwd.decode") << name;
  // ...but its input lives to the end of its backward.
  EXPECT_EQ(life_of(g, "L1.T_I"), std::make_pair(std::string("L0.fwd.decode"), std::string("L1.bwd.gate.wgrad")));
  EXPECT_EQ(life_of(g, "L0.T_I"), std::make_pair(std::string("L0.fwd.gate"), std::string("L0.bwd.gate.wgrad")));
  // The re-run's tensors live from their writer to the layer's last backward task.
  EXPECT_EQ(life_of(g, "L1.recompute.T_M"),
            std::make_pair(std::string("L1.bwd.recompute.fc1.c0"), std::string("L1.bwd.gate.wgrad")));
  EXPECT_EQ(life_of(g, "L1.recompute.T_DI"),
            std::make_pair(std::string("L1.bwd.recompute.dispatch.c0"), std::string("L1.bwd.gate.wgrad")));
  EXPECT_EQ(life_of(g, "L0.recompute.out"),
            std::make_pair(std::string("L0.bwd.recompute.decode"), std::string("L0.bwd.gate.wgrad")));
}

TEST(Checkpointing, CacReusesTheForwardsAllToAllOutputs) {
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), checkpointed(ActivationCheckpointing::kCommAware));
  // Without tensor parallelism the stash is T_DI and T_O themselves, kept to the end.
  EXPECT_EQ(life_of(g, "L0.T_DI"), std::make_pair(std::string("L0.fwd.dispatch.c0"), std::string("L0.bwd.gate.wgrad")));
  EXPECT_EQ(life_of(g, "L0.T_O"), std::make_pair(std::string("L0.fwd.combine.c0"), std::string("L0.bwd.gate.wgrad")));
  EXPECT_EQ(life_of(g, "L0.T_M").second, "L0.fwd.decode");
  EXPECT_FALSE(g.find("L0.bwd.recompute.dispatch.c0", -1).has_value());
  EXPECT_FALSE(g.find("L0.bwd.recompute.combine.c0", -1).has_value());
  for (BufferId b = 0; b < g.num_buffers(); ++b) {
    EXPECT_NE(g.buffer(b).name, "L0.recompute.T_DI");
    EXPECT_NE(g.buffer(b).name, "L0.recompute.T_O");
  }
  EXPECT_TRUE(g.find("L0.bwd.recompute.fc1.c1", 0).has_value());
  EXPECT_NO_THROW(check_acyclic(g));
}

// With duplicate token dropping the all-to-alls receive 1/tp shares: CAC stashes those (R x M / tp)
// and the re-run all-gathers them again into new tensors.
TEST(Checkpointing, CacWithTensorParallelismStashesTheSharesAndGathersAgain) {
  const TaskGraph g =
      build_moe_graph(small_model(), small_cluster(), checkpointed(ActivationCheckpointing::kCommAware, 2, 2));
  EXPECT_EQ(life_of(g, "L0.stash.T_DI"),
            std::make_pair(std::string("L0.fwd.dispatch.tp0.c0"), std::string("L0.bwd.gate.wgrad")));
  EXPECT_EQ(life_of(g, "L0.stash.T_O"),
            std::make_pair(std::string("L0.fwd.combine.tp0.c0"), std::string("L0.bwd.gate.wgrad")));
  for (BufferId b = 0; b < g.num_buffers(); ++b) {
    if (g.buffer(b).name == "L0.stash.T_DI") {
      EXPECT_EQ(g.buffer(b).bytes, 192 * 64 * 2 / 2);
    }
  }
  EXPECT_EQ(life_of(g, "L0.T_DI").second, "L0.fwd.decode");
  EXPECT_EQ(life_of(g, "L0.recompute.T_DI").first, "L0.bwd.recompute.dispatch.allgather.ep0.c0");
  EXPECT_EQ(life_of(g, "L0.recompute.T_O").first, "L0.bwd.recompute.combine.allgather.ep0.c0");
  EXPECT_THAT(stream_ids(g, 0, StreamClass::kCommDispatch),
              ::testing::IsSupersetOf({"L0.bwd.recompute.dispatch.allgather.ep0.c0",
                                       "L0.bwd.recompute.dispatch.allgather.ep0.c1"}));
  EXPECT_EQ(all_to_alls(g), 4 * 2);
  EXPECT_NO_THROW(check_acyclic(g));
}

// The re-run starts when autograd reaches the layer: apart from its gate and the shared experts'
// FC1 (which the compute stream's order starts after the layer above's backward), every re-run
// task waits for data of the re-run -- in particular the all-gathers that replace the all-to-alls
// under cac with dropping, which would otherwise run during the layer above's backward.
TEST(Checkpointing, EveryReRunTaskWaitsForTheReRun) {
  for (OrderPolicy order : kAllPolicies)
    for (ActivationCheckpointing mode : {ActivationCheckpointing::kFull, ActivationCheckpointing::kCommAware})
      for (int tp : {1, 2}) {
        ModelSpec m = small_model();
        m.shared_experts = {1, 64};
        RunSpec r = checkpointed(mode, 2, tp);
        r.order = order;
        r.num_moe_layers = 2;
        const TaskGraph g = build_moe_graph(m, small_cluster(), r);
        int checked = 0;
        for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
          const Task& t = g.task(i);
          if (t.id.find(".bwd.recompute.") == std::string::npos) continue;
          if (t.id.ends_with("recompute.gate") || t.id.ends_with("recompute.shared.fc1")) continue;
          bool has_data = false;
          for (const auto& [from, to, kind] : g.edges())
            if (to == i && kind == DepKind::kData && g.task(from).id.find(".bwd.recompute.") != std::string::npos)
              has_data = true;
          EXPECT_TRUE(has_data) << t.id << " " << to_string(order) << " " << to_string(mode) << " tp " << tp;
          ++checked;
        }
        EXPECT_GT(checked, 10);
      }
}

TEST(Checkpointing, AcyclicForEveryPolicyLayersAndTensorParallelism) {
  for (OrderPolicy order : kAllPolicies)
    for (ActivationCheckpointing mode : {ActivationCheckpointing::kFull, ActivationCheckpointing::kCommAware})
      for (int tp : {1, 2})
        for (bool dtd : {true, false}) {
          ModelSpec m = small_model();
          m.shared_experts = {1, 64};
          RunSpec r = checkpointed(mode, 2, tp);
          r.order = order;
          r.num_moe_layers = 3;
          r.drop_duplicate_tokens = dtd;
          r.grad_sync = true;
          BuildOptions all;
          all.representative_rank = false;
          EXPECT_NO_THROW(check_acyclic(build_moe_graph(m, small_cluster(), r, all)))
              << to_string(order) << " " << to_string(mode) << " tp " << tp << " dtd " << dtd;
        }
}

TEST(Checkpointing, NeedsStrategyNone) {
  RunSpec r = checkpointed(ActivationCheckpointing::kCommAware);
  r.strategy = MemoryStrategy::kS4;
  expect_rejected(small_model(), r, "activation checkpointing (cac) re-runs each layer's forward");
  expect_rejected(small_model(), r, "use strategy none with it (got s4)");
}

}  // namespace
}  // namespace moesim
