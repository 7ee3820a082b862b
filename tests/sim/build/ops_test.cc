// The ops the MoE layer's emitter gives its tasks (sim/graph/op.h): each task's op is the
// operation the layer performs there, not only its cost kind.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sim/build/moe_graph.h"
#include "tests/sim/build/graph_test_util.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

using testing::task_at;

TEST(BuilderOps, EveryStageOfTheLayerHasItsOp) {
  ModelSpec m = testing::small_model();
  m.shared_experts = {1, 32};
  RunSpec r = testing::small_run(2, OrderPolicy::kMPipeMoE, 4);  // E = 8 over 4 ranks: 2 local experts
  const TaskGraph g = build_moe_graph(m, testing::small_cluster(), r);
  const std::map<std::string, Op> expected = {
      {"L0.fwd.gate", Op::kGemm},                {"L0.fwd.route", Op::kTopK},
      {"L0.fwd.encode", Op::kEncode},            {"L0.fwd.dispatch.c0", Op::kAllToAll},
      {"L0.fwd.fc1.c0", Op::kBatchedGemm},       {"L0.fwd.act.c0", Op::kActivation},
      {"L0.fwd.fc2.c1", Op::kBatchedGemm},       {"L0.fwd.combine.c1", Op::kAllToAll},
      {"L0.fwd.decode", Op::kDecode},            {"L0.fwd.shared.fc1", Op::kGemm},
      {"L0.fwd.shared.act", Op::kActivation},    {"L0.bwd.decode", Op::kDecode},
      {"L0.bwd.fc2.dgrad.c0", Op::kBatchedGemm}, {"L0.bwd.act.c0", Op::kActivation},
      {"L0.bwd.fc1.wgrad.c1", Op::kBatchedGemm}, {"L0.bwd.shared.act", Op::kActivation},
      {"L0.bwd.encode", Op::kEncode},            {"L0.bwd.route", Op::kTopK},
      {"L0.bwd.gate.wgrad", Op::kGemm},
  };
  for (const auto& [id, op] : expected) EXPECT_EQ(task_at(g, id).op, op) << id;
}

// Offloading strategies copy on the copy streams, the data-parallel gradients are all-reduced;
// a checkpointed layer's re-run recomputes the activation.
TEST(BuilderOps, CopiesAllReducesAndRecomputes) {
  RunSpec r = testing::small_run(2);
  r.strategy = MemoryStrategy::kS1;
  r.grad_sync = true;
  ClusterSpec pcie = testing::small_cluster();  // offloading needs the node's PCIe links
  pcie.node.pcie_h2d.bandwidth = 25e9;
  pcie.node.pcie_d2h.bandwidth = 25e9;
  const TaskGraph g = build_moe_graph(testing::small_model(), pcie, r);
  int d2h = 0, h2d = 0, all_reduce = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Task& t = g.task(i);
    d2h += t.stream == StreamClass::kCopyD2H;
    h2d += t.stream == StreamClass::kCopyH2D;
    all_reduce += t.stream == StreamClass::kCommGrad;
    if (t.stream == StreamClass::kCopyD2H) {
      EXPECT_EQ(t.op, Op::kCopyD2H) << t.id;
    }
    if (t.stream == StreamClass::kCopyH2D) {
      EXPECT_EQ(t.op, Op::kCopyH2D) << t.id;
    }
    if (t.stream == StreamClass::kCommGrad) {
      EXPECT_EQ(t.op, Op::kAllReduce) << t.id;
    }
  }
  EXPECT_GT(d2h, 0);
  EXPECT_GT(h2d, 0);
  EXPECT_GT(all_reduce, 0);
  RunSpec s4 = testing::small_run(2);
  s4.strategy = MemoryStrategy::kS4;
  const TaskGraph rerun = build_moe_graph(testing::small_model(), testing::small_cluster(), s4);
  EXPECT_EQ(task_at(rerun, "L0.bwd.recompute.act.c0").op, Op::kActivation);
  EXPECT_EQ(task_at(rerun, "L0.bwd.recompute.fc1.c0").op, Op::kGemm);  // one local expert
}

}  // namespace
}  // namespace moesim
