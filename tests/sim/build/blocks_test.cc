// The builder's parts on their own: the slot rule (SlotPool), the ordering policy's issue orders,
// and the layer stack with a block other than the MoE layer (what adding one takes).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sim/build/block.h"
#include "sim/build/emitter.h"
#include "sim/build/layer_stack.h"
#include "sim/build/ordering.h"
#include "sim/build/slot_pool.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// ---------------------------------------------------------------- SlotPool

TEST(SlotPool, OnlyTheFirstWriterOfASlotAllocatesIt) {
  const SlotPool pool({Buf{10}, Buf{11}}, 2);
  EXPECT_THAT(pool.allocated_by(0), ElementsAre(10));
  EXPECT_THAT(pool.allocated_by(1), ElementsAre(11));
  EXPECT_THAT(pool.allocated_by(2), IsEmpty());  // overwrites slot 0
  EXPECT_THAT(pool.allocated_by(5), IsEmpty());
}

TEST(SlotPool, AWriterWaitsForTheReleaseOfThePositionItsSlotHeldBefore) {
  SlotPool pool({Buf{10}, Buf{11}}, 2);
  for (std::size_t q = 0; q < 4; ++q) pool.released_by(q, Node{static_cast<TaskIndex>(100 + q)});
  EXPECT_THAT(pool.release_before(0), IsEmpty());
  EXPECT_THAT(pool.release_before(1), IsEmpty());
  EXPECT_THAT(pool.release_before(2), ElementsAre(100));
  EXPECT_THAT(pool.release_before(5), ElementsAre(103));
  EXPECT_THAT(pool.release_before(6), IsEmpty());  // position 4 was never released
}

TEST(SlotPool, ASingleSlotWaitsForThePreviousPosition) {
  SlotPool pool({Buf{7}}, 1);
  pool.released_by(2, Node{42});  // e.g. the last forward chunk of n = 3
  EXPECT_THAT(pool.release_before(3), ElementsAre(42));  // the first backward restore
}

// ---------------------------------------------------------------- Ordering

std::vector<std::pair<bool, int>> issue(OrderPolicy policy, Pass pass, int n, bool reuse = false,
                                        bool single_stream = false) {
  return Ordering(policy, n, 1, reuse, single_stream).pass_order(pass).issue;
}

TEST(Ordering, SequentialIssuesEachChunksPairInTurn) {
  EXPECT_THAT(issue(OrderPolicy::kSequential, Pass::kForward, 2),
              ElementsAre(std::pair{false, 0}, std::pair{true, 0}, std::pair{false, 1}, std::pair{true, 1}));
}

TEST(Ordering, MPipeMoEForwardPutsTheCombinesOnTheirOwnStream) {
  const CommOrder o = Ordering(OrderPolicy::kMPipeMoE, 2, 2, false, false).pass_order(Pass::kForward);
  EXPECT_EQ(o.first_stream, StreamClass::kCommDispatch);
  EXPECT_EQ(o.second_stream, StreamClass::kCommCombine);
  const CommOrder one = Ordering(OrderPolicy::kMPipeMoE, 2, 2, false, true).pass_order(Pass::kForward);
  EXPECT_EQ(one.second_stream, StreamClass::kCommDispatch);
}

TEST(Ordering, FasterMoEWithReuseRunsTheFirstsAtMostTwoSlotsPlusOneAhead) {
  // slots = 1: dispatch m + 3 goes after combine m.
  EXPECT_THAT(issue(OrderPolicy::kFasterMoE, Pass::kForward, 5, true),
              ElementsAre(std::pair{false, 0}, std::pair{false, 1}, std::pair{false, 2}, std::pair{true, 0},
                          std::pair{false, 3}, std::pair{true, 1}, std::pair{false, 4}, std::pair{true, 2},
                          std::pair{true, 3}, std::pair{true, 4}));
}

TEST(Ordering, TutelProcessesTheBackwardsChunksInReverse) {
  const CommOrder o = Ordering(OrderPolicy::kTutel, 3, 2, false, false).pass_order(Pass::kBackward);
  EXPECT_THAT(o.compute_chunks, ElementsAre(2, 1, 0));
  EXPECT_THAT(o.positions(), ElementsAre(2, 1, 0));
  EXPECT_EQ(o.first_last(false), std::pair(2, 0));
}

// ---------------------------------------------------------------- the layer stack with another block

// A dense block of one GEMM each way: what a new kind of layer needs to write.
class DenseBlock final : public Block {
 public:
  explicit DenseBlock(Emitter& e) : e_(e) {}
  Node forward(int l, const Node& input, const Buf& in, const Buf& out) override {
    const Node task = e_.compute(l, Pass::kForward, "dense", "dense", -1, e_.gemm(1, 8, 8, 8),
                                 Uses{{l == 0 ? in : Buf{}, out}, {}});
    e_.edge(input, task);
    return task;
  }
  Gradient backward(int l, const Gradient& upstream) override {
    const Buf grad = e_.buffer(l, "dX", -1, 64, MemoryCategory::kTemporary);
    const Node task = e_.compute(l, Pass::kBackward, "dense", "dense", -1, e_.gemm(1, 8, 8, 8),
                                 Uses{{grad}, {upstream.buffer}});
    e_.edge(upstream.task, task);
    return Gradient{task, grad};
  }

 private:
  Emitter& e_;
};

TEST(LayerStack, ChainsAnyBlockThroughTheHiddenState) {
  const ModelSpec model = testing::small_model();
  RunSpec run = testing::small_run();
  run.num_moe_layers = 3;
  const LayerDims dims = derive_layer_dims(model, testing::small_cluster(), run);
  TaskGraph graph(dims.ep_size, {0});
  Emitter emitter(graph, dims, nullptr);
  DenseBlock dense(emitter);
  emit_layer_stack(emitter, {&dense, &dense, &dense});

  std::vector<std::string> ids;
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) ids.push_back(graph.task(i).id);
  EXPECT_THAT(ids, ElementsAre("L0.fwd.dense", "L1.fwd.dense", "L2.fwd.dense", "L2.bwd.dense", "L1.bwd.dense",
                               "L0.bwd.dense"));
  // L{l}.T_I flows from layer l-1's forward into layer l; each backward frees the gradient of the
  // block above's input.
  EXPECT_EQ(graph.buffer(graph.task(0).allocates[0]).name, "L0.T_I");
  EXPECT_EQ(graph.buffer(graph.task(1).allocates[0]).name, "L2.T_I");
  EXPECT_THAT(graph.predecessors(1), ElementsAre(0));
  EXPECT_THAT(graph.task(3).frees, IsEmpty());  // the loss's gradient is not a buffer here
  EXPECT_EQ(graph.buffer(graph.task(4).frees[0]).name, "L2.dX");
}

}  // namespace
}  // namespace moesim
