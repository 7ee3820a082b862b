// The IR's typed ops (sim/graph/op.h): names, cost kinds, the op a work gives, and TaskGraph's
// check that a task's op agrees with its work.
#include "sim/graph/op.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "sim/core/error.h"
#include "sim/graph/task_graph.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;

TEST(Op, NamesRoundTripAndAreUnique) {
  const std::vector<std::string> names = op_names();
  ASSERT_EQ(names.size(), 17u);
  for (const std::string& n : names) {
    const auto op = parse_op(n);
    ASSERT_TRUE(op.has_value()) << n;
    EXPECT_EQ(to_string(*op), n);
  }
  EXPECT_FALSE(parse_op("all-to-all").has_value());  // the CollectiveOp spelling is not an op
  EXPECT_EQ(to_string(Op::kAllToAllV), "all_to_allv");
  EXPECT_EQ(to_string(Op::kCopyH2D), "copy_h2d");
}

TEST(Op, EveryOpHasOneCostKind) {
  EXPECT_EQ(kind_of(Op::kGemm), TaskKind::kGemm);
  EXPECT_EQ(kind_of(Op::kBatchedGemm), TaskKind::kGemm);
  for (Op op : {Op::kTopK, Op::kEncode, Op::kDecode, Op::kActivation, Op::kElementwise})
    EXPECT_EQ(kind_of(op), TaskKind::kElementwise) << to_string(op);
  for (Op op : {Op::kAllToAll, Op::kAllToAllV, Op::kSendRecv, Op::kAllReduce, Op::kAllGather, Op::kReduceScatter})
    EXPECT_EQ(kind_of(op), TaskKind::kCollective) << to_string(op);
  for (Op op : {Op::kCopyD2H, Op::kCopyH2D, Op::kCopyD2D}) EXPECT_EQ(kind_of(op), TaskKind::kCopy);
  EXPECT_EQ(kind_of(Op::kHost), TaskKind::kHost);
}

CollectiveWork all_to_allv() {
  auto m = std::make_shared<TrafficMatrix>();
  m->size = 2;
  m->row_bytes = 8;
  m->rows = std::make_shared<const std::vector<std::int64_t>>(std::vector<std::int64_t>{0, 3, 1, 0});
  CollectiveWork w(CollectiveOp::kAllToAll, 0, 0);
  w.traffic = m;
  return w;
}

TEST(Op, TheWorkGivesTheOpButForMemoryBoundKernels) {
  EXPECT_EQ(op_for(GemmWork{1, 4, 4, 4, DType::kBf16, 2}), Op::kGemm);
  EXPECT_EQ(op_for(GemmWork{8, 4, 4, 4, DType::kBf16, 2}), Op::kBatchedGemm);  // e.g. 8 local experts
  EXPECT_EQ(op_for(CollectiveWork(CollectiveOp::kAllToAll, 0, 64)), Op::kAllToAll);
  EXPECT_EQ(op_for(all_to_allv()), Op::kAllToAllV);
  EXPECT_EQ(op_for(CollectiveWork(CollectiveOp::kAllReduce, 0, 64)), Op::kAllReduce);
  EXPECT_EQ(op_for(CollectiveWork(CollectiveOp::kAllGather, 0, 64)), Op::kAllGather);
  EXPECT_EQ(op_for(CollectiveWork(CollectiveOp::kReduceScatter, 0, 64)), Op::kReduceScatter);
  EXPECT_EQ(op_for(CopyWork{16, CopyDirection::kDeviceToHost}), Op::kCopyD2H);
  EXPECT_EQ(op_for(CopyWork{16, CopyDirection::kHostToDevice}), Op::kCopyH2D);
  EXPECT_EQ(op_for(CopyWork{16, CopyDirection::kDeviceToDevice}), Op::kCopyD2D);
  EXPECT_EQ(op_for(HostWork{5}), Op::kHost);
  EXPECT_EQ(op_for(ElementwiseWork{8, 8, 2}), Op::kElementwise);
  EXPECT_EQ(op_for(ElementwiseWork{8, 8, 2}, Op::kTopK), Op::kTopK);
  // The kernel argument names a memory-bound kernel, never another op.
  EXPECT_EQ(op_for(GemmWork{1, 4, 4, 4, DType::kBf16, 2}, Op::kActivation), Op::kGemm);
  EXPECT_THROW(op_for(ElementwiseWork{8, 8, 2}, Op::kGemm), InputError);
}

TEST(Op, AgreementWithTheWork) {
  EXPECT_TRUE(op_agrees(Op::kDecode, ElementwiseWork{8, 8, 2}));
  EXPECT_FALSE(op_agrees(Op::kDecode, GemmWork{1, 4, 4, 4, DType::kBf16, 2}));
  EXPECT_FALSE(op_agrees(Op::kBatchedGemm, GemmWork{1, 4, 4, 4, DType::kBf16, 2}));
  EXPECT_FALSE(op_agrees(Op::kAllToAll, all_to_allv()));
  EXPECT_TRUE(op_agrees(Op::kSendRecv, all_to_allv()));  // sends are priced as their pairs' all-to-allv
  EXPECT_FALSE(op_agrees(Op::kSendRecv, CollectiveWork(CollectiveOp::kAllToAll, 0, 64)));
  EXPECT_FALSE(op_agrees(Op::kAllGather, CollectiveWork(CollectiveOp::kAllReduce, 0, 64)));
  EXPECT_FALSE(op_agrees(Op::kCopyH2D, CopyWork{16, CopyDirection::kDeviceToHost}));
}

TEST(Op, AddTaskSetsAMissingOpAndRefusesADisagreeingOne) {
  TaskGraph g(1, {0});
  Task t;
  t.id = "fc1";
  t.work = GemmWork{2, 4, 4, 4, DType::kBf16, 2};
  EXPECT_EQ(g.task(g.add_task(t)).op, Op::kBatchedGemm);
  t.id = "act";
  t.work = ElementwiseWork{8, 8, 2};
  t.op = Op::kActivation;
  EXPECT_EQ(g.task(g.add_task(t)).op, Op::kActivation);
  t.id = "bad";
  t.op = Op::kGemm;
  try {
    g.add_task(t);
    ADD_FAILURE() << "accepted a gemm op on elementwise work";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("task 'bad': op 'gemm' disagrees with its elementwise work (its op would be "
                                    "'elementwise' or another memory-bound kernel)"));
  }
}

}  // namespace
}  // namespace moesim
