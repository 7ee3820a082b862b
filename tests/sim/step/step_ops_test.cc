// The ops the whole-step emitter gives its tasks (sim/graph/op.h): the pipeline's transfers are
// send_recv, the collectives and GEMMs the op their work gives.
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

}  // namespace
}  // namespace moesim
