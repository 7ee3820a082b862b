// The all-to-all dispatcher's work around the tokens' all-to-alls (sim/step/moe_dispatcher.h,
// Megatron-Core's MoEAlltoAllTokenDispatcher): the counts' all-gather, the split sizes' copies to
// the host that the dispatch waits for, the probabilities' all-to-alls and the chunk sorts.
// Qwen3-30B-A3B (hidden 2,048, 128 experts, top 8) on 16 H100s: pp 2, ep 8 inside dp 8, 512-token
// sequences, so each rank sends C = floor(8 x 512 / 128) = 32 rows to each of the 128 experts
// (4,096 rows) and holds 128 / 8 = 16 local experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr std::int64_t kHidden = 2048, kRows = 4096;

StepSpec qwen_step(int tp, int ep) {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = tp;
  s.layout.pp = 2;
  s.layout.ep = ep;
  s.global_batch = 16 / tp;
  s.seq = 512;
  s.sequence_parallel = tp > 1;
  return s;
}

SimulatedStep simulate(const StepSpec& s) {
  return simulate_training_step(testing::model_preset("qwen3-30b-a3b"), testing::cluster_preset("dgx-h100-ndr", 16), s);
}

// A task by id: kernels and copies on stage 0's rank, collectives (rank -1) by their id alone.
TaskIndex task(const TaskGraph& g, const std::string& id) {
  auto i = g.find(id, 0);
  if (!i) i = g.find(id, -1);
  EXPECT_TRUE(i.has_value()) << id;
  return i.value_or(0);
}

TEST(MoeDispatcher, CountsAllGatheredOverTheTensorAndExpertGroupThenFourCopiesToTheHost) {
  const SimulatedStep sim = simulate(qwen_step(2, 4));
  const TaskGraph& g = sim.graph.graph;
  const auto& gather = std::get<CollectiveWork>(g.task(task(g, "mb0.L0.fwd.counts.allgather")).work);
  EXPECT_EQ(gather.op, CollectiveOp::kAllGather);
  // Expert ranks 0, 2, 4, 6 (stride tp) with their tensor peers; 128 int64 counts each.
  EXPECT_EQ(g.group(gather.group), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(gather.bytes_per_peer, 128 * 8);
  // tokens_per_expert (32 local experts), input_splits and output_splits (ep 4), output_splits_tp (tp 2).
  const std::vector<std::int64_t> bytes = {32 * 8, 4 * 8, 4 * 8, 2 * 8};
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const Task& t = g.task(task(g, "mb0.L0.fwd.splits.d2h" + std::to_string(i)));
    EXPECT_EQ(t.stream, StreamClass::kCopyD2H);
    const auto& copy = std::get<CopyWork>(t.work);
    EXPECT_EQ(copy.direction, CopyDirection::kDeviceToHost);
    EXPECT_EQ(copy.bytes, bytes[i]) << i;
  }
}

TEST(MoeDispatcher, TheDispatchWaitsForTheLastCopyAndTheCopiesRunOneAfterAnother) {
  const SimulatedStep sim = simulate(qwen_step(1, 8));
  const TaskGraph& g = sim.graph.graph;
  const auto& rec = sim.run.trace.records;
  const TaskIndex dispatch = task(g, "mb0.L0.fwd.dispatch");
  const TaskIndex last_copy = task(g, "mb0.L0.fwd.splits.d2h3");
  const std::vector<TaskIndex> before = g.predecessors(dispatch);
  EXPECT_NE(std::find(before.begin(), before.end(), last_copy), before.end());
  EXPECT_GE(rec[dispatch].start_ns, rec[last_copy].end_ns);
  // Each copy pays at least the node's PCIe latency (hardware/nodes/hgx-h100.yaml: 10 us), in turn.
  const TaskIndex first_copy = task(g, "mb0.L0.fwd.splits.d2h0");
  EXPECT_GE(rec[last_copy].end_ns - rec[first_copy].start_ns, 4 * 10'000);
}

TEST(MoeDispatcher, ProbabilitiesTravelBesideTheTokensAndSixteenLocalExpertsSortTheirRows) {
  const SimulatedStep sim = simulate(qwen_step(1, 8));
  const TaskGraph& g = sim.graph.graph;
  for (const std::string id : {"mb0.L0.fwd.dispatch.probs", "mb0.L0.bwd.dispatch.probs"}) {
    const auto& w = std::get<CollectiveWork>(g.task(task(g, id)).work);
    EXPECT_EQ(w.op, CollectiveOp::kAllToAll);
    EXPECT_EQ(w.bytes_per_peer, kRows * 2 / 8) << id;  // one bf16 value per row, over 8 ranks
  }
  // After the dispatch the rows and their probabilities, before the combine the rows alone; the
  // backward sorts the gradients back. bf16: 2 bytes per value, read once and written once.
  const std::vector<std::pair<std::string, std::int64_t>> sorts = {
      {"mb0.L0.fwd.dispatch.sort", kRows * kHidden + kRows},
      {"mb0.L0.fwd.combine.sort", kRows * kHidden},
      {"mb0.L0.bwd.combine.sort", kRows * kHidden},
      {"mb0.L0.bwd.dispatch.sort", kRows * kHidden + kRows}};
  for (const auto& [id, elems] : sorts) {
    const auto& w = std::get<ElementwiseWork>(g.task(task(g, id)).work);
    EXPECT_EQ(w.bytes_read, 2 * elems) << id;
    EXPECT_EQ(w.bytes_written, 2 * elems) << id;
  }
  // The forward's order: dispatch, its probabilities, the sort, the experts.
  EXPECT_LT(task(g, "mb0.L0.fwd.dispatch"), task(g, "mb0.L0.fwd.dispatch.probs"));
  EXPECT_LT(task(g, "mb0.L0.fwd.dispatch.probs"), task(g, "mb0.L0.fwd.dispatch.sort"));
  EXPECT_LT(task(g, "mb0.L0.fwd.dispatch.sort"), task(g, "mb0.L0.fwd.experts.fc1"));
}

TEST(MoeDispatcher, NothingWithoutExpertParallelism) {
  const SimulatedStep sim = simulate(qwen_step(1, 1));
  const TaskGraph& g = sim.graph.graph;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const std::string& id = g.task(i).id;
    EXPECT_EQ(id.find(".sort"), std::string::npos) << id;
    EXPECT_EQ(id.find(".probs"), std::string::npos) << id;
    EXPECT_EQ(id.find("splits.d2h"), std::string::npos) << id;
    EXPECT_EQ(id.find("counts.allgather"), std::string::npos) << id;
  }
}

}  // namespace
}  // namespace moesim
