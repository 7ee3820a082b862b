// The ops the whole-step emitter gives its tasks (sim/graph/op.h): the pipeline's transfers are
// send_recv, the collectives and GEMMs the op their work gives; the MoE MLP's memory-bound kernels
// the ops the single-layer MoE block gives them.
#include <gtest/gtest.h>

#include <map>

#include "sim/step/step_graph.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

TEST(StepOps, PipelineSendsAreSendRecvAndEveryOtherOpFollowsItsWork) {
  const StepGraph sg = build_step_graph(testing::model_preset("gpt-1.7b"), testing::a100_cluster(16),
                                        testing::small_gpt_step());  // tp 2, pp 4, dp 2
  const TaskGraph& g = sg.graph;
  std::map<Op, int> count;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Task& t = g.task(i);
    ASSERT_TRUE(t.op.has_value()) << t.id;
    ++count[*t.op];
    if (t.stream == StreamClass::kCommPipeline) {
      EXPECT_EQ(t.op, Op::kSendRecv) << t.id;
    } else {
      EXPECT_EQ(t.op, op_for(t.work)) << t.id;
    }
  }
  EXPECT_GT(count[Op::kSendRecv], 0);
  EXPECT_GT(count[Op::kGemm], 0);
  EXPECT_GT(count[Op::kBatchedGemm], 0);  // attention's per-head products
  EXPECT_GT(count[Op::kAllReduce], 0);    // tensor parallelism's and the gradients'
  EXPECT_GT(count[Op::kElementwise], 0);
}

// Qwen3-30B-A3B on 16 A100s (tp 2, pp 2, ep 4): the router's top-k, the permutation into expert
// order (encode), the un-permutation (decode) and the experts' activation, forward and backward.
TEST(StepOps, MoeKernelsAreNamedAsTheLayerBlockNamesThem) {
  const StepSpec s = testing::small_moe_step();
  const StepGraph sg = build_step_graph(testing::model_preset("qwen3-30b-a3b"), testing::a100_cluster(16), s);
  const TaskGraph& g = sg.graph;
  const std::map<std::string, Op> expected = {
      {"mb0.L0.fwd.topk", Op::kTopK},           {"mb0.L0.fwd.permute", Op::kEncode},
      {"mb0.L0.fwd.unpermute", Op::kDecode},    {"mb0.L0.fwd.experts.act", Op::kActivation},
      {"mb0.L0.bwd.topk", Op::kTopK},           {"mb0.L0.bwd.permute", Op::kEncode},
      {"mb0.L0.bwd.unpermute", Op::kDecode},    {"mb0.L0.bwd.experts.act", Op::kActivation},
      {"mb0.L0.fwd.dispatch.sort", Op::kElementwise}};
  for (const auto& [id, op] : expected) {
    const auto t = g.find(id, 0);
    ASSERT_TRUE(t.has_value()) << id;
    EXPECT_EQ(g.task(*t).op, op) << id;
  }
}

}  // namespace
}  // namespace moesim
