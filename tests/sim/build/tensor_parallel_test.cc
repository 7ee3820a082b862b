// The MoE layer graph under DeepSpeed-TED's hybrid tensor x expert x data parallelism (reference
// section 5): sizes and rules, the tensor-parallel collectives and where they sit on the streams,
// their groups and bytes, duplicate token dropping, shared experts, the gradient all-reduces.
//
// Setup (tests/sim/build/test_specs.h): M = 64, H = 128, E = 8, k = 2, f = 1, bf16, B = 96 tokens
// per GPU on 8 GPUs (2 nodes x 4). C = floor(2 * 96 / 8) = 24. With tp = 2 the expert-parallel
// group has 8 / 2 = 4 ranks, E_l = 2 local experts, each rank holds H / 2 = 64 of each expert's
// hidden columns. With n = 2: rows of a chunk's dispatch tensor E * C / n = 96, rows per local
// expert and chunk N * C / n = 48.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"
#include "sim/build/memory_sizes.h"
#include "sim/build/moe_graph.h"
#include "tests/sim/build/graph_test_util.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using moesim::testing::expect_rejected;
using moesim::testing::kAllPolicies;
using moesim::testing::predecessor_ids;
using moesim::testing::small_cluster;
using moesim::testing::small_model;
using moesim::testing::small_run;
using moesim::testing::stream_ids;
using moesim::testing::task_at;

// The test cluster with PCIe links, for the offloading strategies.
ClusterSpec pcie_cluster() {
  ClusterSpec c = small_cluster();
  c.node.pcie_h2d.bandwidth = 25e9;
  c.node.pcie_d2h.bandwidth = 25e9;
  return c;
}

RunSpec ted_run(int tp, int chunks = 2, int ep = 0, bool dtd = true) {
  RunSpec r = small_run(chunks, OrderPolicy::kMPipeMoE, ep);
  r.tp_size = tp;
  r.drop_duplicate_tokens = dtd;
  return r;
}

const CollectiveWork& coll(const TaskGraph& g, const std::string& id) {
  return std::get<CollectiveWork>(task_at(g, id).work);
}

const GemmWork& gemm(const TaskGraph& g, const std::string& id) { return std::get<GemmWork>(task_at(g, id).work); }

std::int64_t buffer_bytes(const TaskGraph& g, const std::string& name, int rank = 0) {
  for (BufferId b = 0; b < g.num_buffers(); ++b)
    if (g.buffer(b).name == name && g.buffer(b).rank == rank) return g.buffer(b).bytes;
  ADD_FAILURE() << "no buffer " << name;
  return -1;
}

// ---------------------------------------------------------------- sizes and rules

TEST(TensorParallelDims, SplitsTheGpusAndTheExperts) {
  const LayerDims d = derive_layer_dims(small_model(), small_cluster(), ted_run(2));
  EXPECT_EQ(d.tp_size, 2);
  EXPECT_EQ(d.ep_size, 4);  // ep 0 = GPUs / tp
  EXPECT_EQ(d.dp_size, 1);
  EXPECT_EQ(d.local_experts, 2);
  EXPECT_TRUE(d.drop_duplicate_tokens);
  EXPECT_EQ(d.d_ffn_shard(), 64);
  EXPECT_EQ(d.fc1_out_shard(), 64);
  EXPECT_EQ(d.capacity, 24);
  EXPECT_EQ(d.rows_per_chunk(), 96);
  EXPECT_EQ(d.rows_per_expert_chunk(), 48);
  EXPECT_EQ(d.layout().describe(), "tp 2 x ep 4 x dp 1 = 8 GPUs");

  const LayerDims two = derive_layer_dims(small_model(), small_cluster(), ted_run(2, 1, 2));
  EXPECT_EQ(two.dp_size, 2);
  EXPECT_EQ(two.local_experts, 4);
  ModelSpec swiglu = small_model();
  swiglu.activation = Activation::kSwiglu;
  EXPECT_EQ(derive_layer_dims(swiglu, small_cluster(), ted_run(4)).fc1_out_shard(), 2 * 128 / 4);
}

// TED: the all-to-all send volume per GPU drops from V (e-1)/e to V/t (e-1)/e.
TEST(TensorParallelDims, DuplicateTokenDroppingSendsOneShareOfTheTokens) {
  for (int tp : {2, 4, 8}) {
    const LayerDims with = derive_layer_dims(small_model(), small_cluster(), ted_run(tp, 1));
    const LayerDims without = derive_layer_dims(small_model(), small_cluster(), ted_run(tp, 1, 0, false));
    EXPECT_FALSE(without.drop_duplicate_tokens);
    EXPECT_EQ(with.token_share(), tp);
    EXPECT_EQ(without.token_share(), 1);
    EXPECT_EQ(with.a2a_bytes_per_peer() * tp, without.a2a_bytes_per_peer()) << "tp " << tp;
    // Without dropping every tensor-parallel rank sends all its tokens: V per GPU, as with tp = 1
    // at the same expert-parallel size.
    RunSpec plain = small_run(1, OrderPolicy::kMPipeMoE, without.ep_size);
    EXPECT_EQ(without.a2a_bytes_per_peer(),
              derive_layer_dims(small_model(), small_cluster(), plain).a2a_bytes_per_peer());
  }
}

TEST(TensorParallelDims, DroppingPadsTheChunksTheTpRanksDoNotDivide) {
  // C = 24 is kept whole. n = 8 gives chunks of 3 slots: each of tp = 2 ranks sends ceil(3/2) = 2
  // per (expert, source) and the all-gather restores 2 x 2 = 4 (one slot of padding).
  const LayerDims d = derive_layer_dims(small_model(), small_cluster(), ted_run(2, 8));
  EXPECT_EQ(d.capacity, 24);
  EXPECT_EQ(d.chunk_capacity(7), 3);
  EXPECT_EQ(d.shared_chunk_capacity(7), 2);
  EXPECT_EQ(d.a2a_bytes_per_peer(7), d.local_experts * 2 * 64 * 2);
  EXPECT_EQ(d.gathered_rows_per_chunk(7), 8 * 4);
  EXPECT_EQ(d.rows_per_chunk(7), 8 * 3);
  // Divisible chunks have no padding: n = 3 gives 8 slots, 4 per rank.
  const LayerDims even = derive_layer_dims(small_model(), small_cluster(), ted_run(2, 3));
  EXPECT_EQ(even.shared_chunk_capacity(), 4);
  EXPECT_EQ(even.gathered_rows_per_chunk(), even.rows_per_chunk());
  // Fewer slots in a chunk than tp ranks still runs (padded to one slot per rank) ...
  EXPECT_EQ(derive_layer_dims(small_model(), small_cluster(), ted_run(8, 4)).shared_chunk_capacity(), 1);
  // ... but a chunk needs at least one slot.
  expect_rejected(small_model(), ted_run(2, 25), "is less than num_chunks n = 25");
}

TEST(TensorParallelDims, RejectsLayoutsThatDoNotFit) {
  expect_rejected(small_model(), ted_run(3), "tp_size 3 must divide the cluster's GPU count 8");
  expect_rejected(small_model(), ted_run(16), "tp_size 16 must divide the cluster's GPU count 8");
  expect_rejected(small_model(), ted_run(0), "tp_size must be at least 1, got 0");
  expect_rejected(small_model(), ted_run(2, 1, 8), "tp_size x ep_size = 2 x 8 must divide the cluster's GPU count 8");
  expect_rejected(small_model(), ted_run(4, 1, 4), "tp_size x ep_size = 4 x 4 must divide");
  RunSpec hierarchical = ted_run(2);
  hierarchical.all_to_all = AllToAllAlgorithm::kHierarchical;
  expect_rejected(small_model(), hierarchical, "the 2DH all-to-all (--a2a 2dh) needs expert-parallel groups of whole nodes");
  ModelSpec six = small_model();
  six.num_experts = 6;
  six.top_k = 1;
  expect_rejected(six, ted_run(2, 1), "num_experts 6 is not divisible by ep_size 4 (ep_size 0: the GPUs / tp_size = 8 / 2)");
  ModelSpec m = small_model();
  m.d_ffn = 100;
  expect_rejected(m, ted_run(8, 1), "d_ffn 100 is not divisible by tp_size 8");
  m = small_model();
  m.shared_experts = {1, 36};
  expect_rejected(m, ted_run(8, 1), "the shared experts' width count x d_ffn = 36 is not divisible by tp_size 8");
  RunSpec zipf = ted_run(2);
  zipf.routing = parse_routing_spec("zipf:1.2", SourceLocation{});
  expect_rejected(small_model(), zipf, "imbalanced routing is simulated for expert parallelism only");
  RunSpec zero = ted_run(1);
  zero.zero_stage = 2;
  expect_rejected(small_model(), zero, "zero_stage must be 0");
  ClusterSpec loopback = small_cluster();
  loopback.node.loopback = true;
  loopback.num_nodes = 1;
  expect_rejected(small_model(), ted_run(2), "runs expert parallelism only", loopback);
}

// ---------------------------------------------------------------- graph structure

TEST(TensorParallelGraph, CollectivesOnTheCommStreamsInIssueOrder) {
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), ted_run(2));
  EXPECT_EQ(g.world_size(), 8);
  EXPECT_EQ(g.simulated_ranks(), std::vector<int>{0});
  EXPECT_THAT(stream_ids(g, 0, StreamClass::kCommDispatch),
              ElementsAreArray({// forward: each dispatch, then the all-gather that completes T_DI
                                "L0.fwd.dispatch.tp0.c0", "L0.fwd.dispatch.allgather.ep0.c0", "L0.fwd.dispatch.tp0.c1",
                                "L0.fwd.dispatch.allgather.ep0.c1",
                                // backward (one channel, interleaved): G0 | G1 D0 | D1
                                "L0.bwd.combine.tp0.c0", "L0.bwd.combine.allgather.ep0.c0", "L0.bwd.combine.tp0.c1",
                                "L0.bwd.combine.allgather.ep0.c1", "L0.bwd.fc1.allreduce.ep0.c0",
                                "L0.bwd.dispatch.tp0.c0", "L0.bwd.dispatch.allgather.ep0.c0",
                                "L0.bwd.fc1.allreduce.ep0.c1", "L0.bwd.dispatch.tp0.c1",
                                "L0.bwd.dispatch.allgather.ep0.c1"}));
  EXPECT_THAT(stream_ids(g, 0, StreamClass::kCommCombine),
              ElementsAreArray({"L0.fwd.fc2.allreduce.ep0.c0", "L0.fwd.combine.tp0.c0", "L0.fwd.combine.allgather.ep0.c0",
                                "L0.fwd.fc2.allreduce.ep0.c1", "L0.fwd.combine.tp0.c1",
                                "L0.fwd.combine.allgather.ep0.c1"}));
  EXPECT_TRUE(stream_ids(g, 0, StreamClass::kCommGrad).empty());
  // Groups: the all-to-alls among the ranks of tensor index 0, the rest within the tensor group.
  EXPECT_EQ(g.group(coll(g, "L0.fwd.dispatch.tp0.c0").group), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(g.group(coll(g, "L0.fwd.dispatch.allgather.ep0.c0").group), (std::vector<int>{0, 1}));
  EXPECT_EQ(g.group(coll(g, "L0.fwd.fc2.allreduce.ep0.c0").group), (std::vector<int>{0, 1}));
  EXPECT_EQ(task_at(g, "L0.fwd.dispatch.allgather.ep0.c0").stage, "tp_gather");
  EXPECT_EQ(task_at(g, "L0.bwd.fc1.allreduce.ep0.c1").stage, "tp_reduce");
  check_acyclic(g);
}

TEST(TensorParallelGraph, BytesAndGemmShapes) {
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), ted_run(2));
  // All-to-all: E_l * (C/n) / tp * M * 2 B = 2 * 12 / 2 * 64 * 2.
  EXPECT_EQ(coll(g, "L0.fwd.dispatch.tp0.c0").bytes_per_peer, 1536);
  EXPECT_EQ(coll(g, "L0.bwd.dispatch.tp0.c1").bytes_per_peer, 1536);
  // Tensor-parallel collectives of a chunk's dispatch tensor (96 x 64 x 2 B = 12288), each member's
  // contribution 12288 / 2.
  for (const char* id : {"L0.fwd.dispatch.allgather.ep0.c0", "L0.fwd.combine.allgather.ep0.c1",
                         "L0.fwd.fc2.allreduce.ep0.c0", "L0.bwd.fc1.allreduce.ep0.c0",
                         "L0.bwd.combine.allgather.ep0.c0", "L0.bwd.dispatch.allgather.ep0.c1"}) {
    EXPECT_EQ(coll(g, id).bytes_per_peer, 6144) << id;
  }
  EXPECT_EQ(coll(g, "L0.fwd.dispatch.allgather.ep0.c0").op, CollectiveOp::kAllGather);
  EXPECT_EQ(coll(g, "L0.fwd.fc2.allreduce.ep0.c0").op, CollectiveOp::kAllReduce);
  // FC1 column-parallel (64 of 128 outputs), FC2 row-parallel (64 of 128 inputs), 2 local experts
  // of 48 rows per chunk.
  const GemmWork& fc1 = gemm(g, "L0.fwd.fc1.c0");
  EXPECT_EQ(fc1.batch, 2);
  EXPECT_EQ(fc1.m, 48);
  EXPECT_EQ(fc1.k, 64);
  EXPECT_EQ(fc1.n, 64);
  const GemmWork& fc2 = gemm(g, "L0.fwd.fc2.c0");
  EXPECT_EQ(fc2.k, 64);
  EXPECT_EQ(fc2.n, 64);
  EXPECT_EQ(gemm(g, "L0.bwd.fc2.wgrad.c0").m, 64);   // dW2 slice: H/tp x M
  EXPECT_EQ(gemm(g, "L0.bwd.fc1.dgrad.c0").k, 64);   // dDI = dM (F/tp wide) x W1 slice^T
  // Expert FLOP per rank are 1/tp of an expert-parallel rank holding the same experts whole.
  const TaskGraph ep_only = build_moe_graph(small_model(), small_cluster(), small_run(2, OrderPolicy::kMPipeMoE, 4));
  EXPECT_EQ(2 * fc1.flops(), gemm(ep_only, "L0.fwd.fc1.c0").flops());
  // The router stays whole and replicated.
  EXPECT_EQ(gemm(g, "L0.fwd.gate").n, 8);
  EXPECT_EQ(gemm(g, "L0.fwd.gate").k, 64);
}

TEST(TensorParallelGraph, WithoutDroppingNoAllGathersAndWholeAllToAlls) {
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), ted_run(2, 2, 0, false));
  EXPECT_THAT(stream_ids(g, 0, StreamClass::kCommCombine),
              ElementsAre("L0.fwd.fc2.allreduce.ep0.c0", "L0.fwd.combine.tp0.c0", "L0.fwd.fc2.allreduce.ep0.c1",
                          "L0.fwd.combine.tp0.c1"));
  EXPECT_EQ(coll(g, "L0.fwd.dispatch.tp0.c0").bytes_per_peer, 3072);
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) EXPECT_NE(g.task(i).stage, "tp_gather") << g.task(i).id;
  check_acyclic(g);
}

TEST(TensorParallelGraph, DataEdgesThroughTheTensorParallelCollectives) {
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), ted_run(2));
  const auto preds = [&](const std::string& id) { return predecessor_ids(g, id); };
  EXPECT_TRUE(preds("L0.fwd.dispatch.allgather.ep0.c1").count("L0.fwd.dispatch.tp0.c1"));
  EXPECT_TRUE(preds("L0.fwd.fc1.c1").count("L0.fwd.dispatch.allgather.ep0.c1"));
  EXPECT_FALSE(preds("L0.fwd.fc1.c1").count("L0.fwd.dispatch.tp0.c1"));
  EXPECT_TRUE(preds("L0.fwd.fc2.allreduce.ep0.c0").count("L0.fwd.fc2.c0"));
  EXPECT_TRUE(preds("L0.fwd.combine.tp0.c0").count("L0.fwd.fc2.allreduce.ep0.c0"));
  EXPECT_TRUE(preds("L0.fwd.decode").count("L0.fwd.combine.allgather.ep0.c1"));
  EXPECT_TRUE(preds("L0.bwd.fc2.dgrad.c0").count("L0.bwd.combine.allgather.ep0.c0"));
  EXPECT_TRUE(preds("L0.bwd.fc2.wgrad.c0").count("L0.bwd.combine.allgather.ep0.c0"));
  EXPECT_TRUE(preds("L0.bwd.fc1.allreduce.ep0.c0").count("L0.bwd.fc1.dgrad.c0"));
  EXPECT_TRUE(preds("L0.bwd.dispatch.tp0.c0").count("L0.bwd.fc1.allreduce.ep0.c0"));
  EXPECT_TRUE(preds("L0.bwd.encode").count("L0.bwd.dispatch.allgather.ep0.c1"));
}

// Re-dispatch with dropping is an all-to-all and an all-gather; the all-to-all writes the slot
// (the reuse edge's target), the all-gather completes T_DI for the W1 gradient.
TEST(TensorParallelGraph, RedispatchRestoresThroughAnAllGather) {
  RunSpec r = ted_run(2, 4);
  r.strategy = MemoryStrategy::kS4;
  r.slots = 1;
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), r);
  const auto preds = [&](const std::string& id) {
    auto i = g.find(id, 0);
    if (!i) i = g.find(id, -1);
    std::vector<std::pair<std::string, DepKind>> out;
    for (const auto& [from, to, kind] : g.edges())
      if (to == *i) out.emplace_back(g.task(from).id, kind);
    return out;
  };
  const auto has = [&](const std::string& to, const std::string& from, DepKind kind) {
    for (const auto& [f, k] : preds(to))
      if (f == from && k == kind) return true;
    return false;
  };
  EXPECT_TRUE(has("L0.bwd.redispatch.allgather.ep0.c1", "L0.bwd.redispatch.tp0.c1", DepKind::kData));
  EXPECT_TRUE(has("L0.bwd.recompute.fc1.c1", "L0.bwd.redispatch.allgather.ep0.c1", DepKind::kData));
  EXPECT_TRUE(has("L0.bwd.fc1.wgrad.c1", "L0.bwd.redispatch.allgather.ep0.c1", DepKind::kData));
  EXPECT_TRUE(has("L0.bwd.redispatch.tp0.c2", "L0.bwd.fc1.wgrad.c1", DepKind::kReuse));
  check_acyclic(g);
}

TEST(TensorParallelGraph, AcyclicForEveryPolicyStrategyAndDropping) {
  for (OrderPolicy order : kAllPolicies)
    for (MemoryStrategy s : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
                             MemoryStrategy::kS4})
      for (bool dtd : {true, false})
        for (int n : {1, 3}) {
          RunSpec r = ted_run(2, n, 0, dtd);
          r.order = order;
          r.strategy = s;
          r.num_moe_layers = 2;
          BuildOptions all;
          all.representative_rank = false;
          const TaskGraph g = build_moe_graph(small_model(), pcie_cluster(), r, all);
          EXPECT_NO_THROW(check_acyclic(g)) << to_string(order) << " " << to_string(s) << " dtd " << dtd << " n " << n;
        }
}

TEST(TensorParallelGraph, EveryRankOfAReplica) {
  BuildOptions all;
  all.representative_rank = false;
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), ted_run(2, 1), all);
  EXPECT_EQ(g.simulated_ranks(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // One all-to-all per tensor index, one all-gather per expert index.
  EXPECT_EQ(g.group(coll(g, "L0.fwd.dispatch.tp1.c0").group), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(g.group(coll(g, "L0.fwd.dispatch.allgather.ep3.c0").group), (std::vector<int>{6, 7}));
  std::size_t a2a = 0, gathers = 0, reduces = 0;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Task& t = g.task(i);
    if (!t.is_collective()) continue;
    const auto& w = std::get<CollectiveWork>(t.work);
    if (w.op == CollectiveOp::kAllToAll) ++a2a;
    if (w.op == CollectiveOp::kAllGather) ++gathers;
    if (w.op == CollectiveOp::kAllReduce) ++reduces;
  }
  EXPECT_EQ(a2a, 2u * 4u);       // 2 tensor indices x 4 all-to-alls
  EXPECT_EQ(gathers, 4u * 4u);   // 4 expert indices x 4 all-gathers
  EXPECT_EQ(reduces, 4u * 2u);   // 4 expert indices x 2 all-reduces
  // Rank 5's streams are rank 0's with its own groups' suffixes.
  EXPECT_THAT(stream_ids(g, 5, StreamClass::kCommDispatch),
              ElementsAre("L0.fwd.dispatch.tp1.c0", "L0.fwd.dispatch.allgather.ep2.c0", "L0.bwd.combine.tp1.c0",
                          "L0.bwd.combine.allgather.ep2.c0", "L0.bwd.fc1.allreduce.ep2.c0", "L0.bwd.dispatch.tp1.c0",
                          "L0.bwd.dispatch.allgather.ep2.c0"));
  check_acyclic(g);
}

// ---------------------------------------------------------------- shared experts

TEST(TensorParallelGraph, SharedExpertsAreAMegatronMlp) {
  ModelSpec m = small_model();
  m.shared_experts = {2, 32};  // width 64, 32 per rank with tp = 2
  const TaskGraph g = build_moe_graph(m, small_cluster(), ted_run(2));
  EXPECT_EQ(gemm(g, "L0.fwd.shared.fc1").n, 32);
  EXPECT_EQ(gemm(g, "L0.fwd.shared.fc2").k, 32);
  const CollectiveWork& fwd = coll(g, "L0.fwd.shared.allreduce.ep0");
  EXPECT_EQ(fwd.op, CollectiveOp::kAllReduce);
  EXPECT_EQ(fwd.bytes_per_peer, 96 * 64 * 2 / 2);  // B x M, each member's half
  EXPECT_EQ(task_at(g, "L0.fwd.shared.allreduce.ep0").stream, StreamClass::kCommCombine);
  EXPECT_EQ(stream_ids(g, 0, StreamClass::kCommCombine).front(), "L0.fwd.shared.allreduce.ep0");
  EXPECT_EQ(task_at(g, "L0.bwd.shared.allreduce.ep0").stream, StreamClass::kCommCombine);
  const auto preds = [&](const std::string& id) { return predecessor_ids(g, id); };
  EXPECT_TRUE(preds("L0.fwd.decode").count("L0.fwd.shared.allreduce.ep0"));
  EXPECT_TRUE(preds("L0.bwd.gate.dgrad").count("L0.bwd.shared.allreduce.ep0"));
  EXPECT_EQ(buffer_bytes(g, "L0.shared.T_M"), 96 * 32 * 2);
  check_acyclic(g);
}

// ---------------------------------------------------------------- memory

TEST(TensorParallelGraph, BuffersHoldTheRanksSlices) {
  ModelSpec m = small_model();
  m.activation = Activation::kSwiglu;
  RunSpec r = ted_run(2);
  const TaskGraph g = build_moe_graph(m, small_cluster(), r);
  // R = E * C = 192 rows; T_M holds FC1's output slice, 2H / tp = 128 wide; T_DI and T_DO whole.
  EXPECT_EQ(buffer_bytes(g, "L0.T_M"), 192 * 128 * 2);
  EXPECT_EQ(buffer_bytes(g, "L0.T_DI"), 192 * 64 * 2);
  EXPECT_EQ(buffer_bytes(g, "L0.T_DO"), 192 * 64 * 2);
  EXPECT_EQ(buffer_bytes(g, "L0.T_O"), 192 * 64 * 2);
  EXPECT_EQ(buffer_bytes(g, "L0.dM"), 192 * 128 * 2);
  EXPECT_EQ(buffer_bytes(g, "L0.bwd.dA.c0"), 96 * 64 * 2);  // swiglu's dA: R/n x H/tp
  // Parameters: gate 8 x 64 whole, 2 local experts of (64 x 256 + 128 x 64) / 2 = 12288.
  const std::int64_t params = 8 * 64 + 2 * 12288;
  EXPECT_EQ(buffer_bytes(g, "L0.params"), params * 2);
  r.strategy = MemoryStrategy::kS3;
  const TaskGraph s3 = build_moe_graph(m, pcie_cluster(), r);
  EXPECT_EQ(buffer_bytes(s3, "L0.T_M.slot0"), 96 * 128 * 2);
  EXPECT_EQ(buffer_bytes(s3, "L0.T_DI.slot0"), 96 * 64 * 2);
  EXPECT_EQ(buffer_bytes(s3, "L0.host.T_DI"), 192 * 64 * 2);
}

// ---------------------------------------------------------------- gradient all-reduces

TEST(TensorParallelGraph, GradientAllReducesOverTheDataParallelGroups) {
  // tp 2 x ep 2 x dp 2 on 8 GPUs, 4 local experts.
  RunSpec r = ted_run(2, 2, 2);
  r.grad_sync = true;
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), r);
  EXPECT_EQ(g.world_size(), 8);
  EXPECT_EQ(g.simulated_ranks(), std::vector<int>{0});
  // Expert gradients of rank 0: 4 x (64 x 128 + 128 x 64) / 2 = 32768 bf16 values = 65536 B, over
  // the ranks holding the same shards (rank 0 and its replica's rank 4).
  const CollectiveWork& experts = coll(g, "L0.bwd.grad.experts.allreduce.ep0.tp0");
  EXPECT_EQ(experts.op, CollectiveOp::kAllReduce);
  EXPECT_EQ(g.group(experts.group), (std::vector<int>{0, 4}));
  EXPECT_EQ(experts.bytes_per_peer, 65536 / 2);
  // The gate (8 x 64 bf16 = 1024 B) over the ranks of tensor index 0.
  const CollectiveWork& dense = coll(g, "L0.bwd.grad.dense.allreduce.tp0");
  EXPECT_EQ(g.group(dense.group), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(dense.bytes_per_peer, 1024 / 4);
  EXPECT_THAT(stream_ids(g, 0, StreamClass::kCommGrad),
              ElementsAre("L0.bwd.grad.experts.allreduce.ep0.tp0", "L0.bwd.grad.dense.allreduce.tp0"));
  EXPECT_EQ(task_at(g, "L0.bwd.grad.experts.allreduce.ep0.tp0").stage, "grad_sync");
  // The world spans the replicas; the first replica's collectives keep their ids.
  EXPECT_TRUE(g.find("L0.fwd.dispatch.tp0.c0", -1).has_value());
  const auto preds = [&](const std::string& id) { return predecessor_ids(g, id); };
  EXPECT_TRUE(preds("L0.bwd.grad.experts.allreduce.ep0.tp0").count("L0.bwd.fc1.wgrad.c1"));
  EXPECT_TRUE(preds("L0.bwd.grad.experts.allreduce.ep0.tp0").count("L0.bwd.fc2.wgrad.c0"));
  EXPECT_TRUE(preds("L0.bwd.grad.dense.allreduce.tp0").count("L0.bwd.gate.wgrad"));
  check_acyclic(g);

  // Every replica simulated: 8 ranks, one expert all-reduce per (ep, tp) position.
  BuildOptions all;
  all.representative_rank = false;
  all.all_replicas = true;
  const TaskGraph full = build_moe_graph(small_model(), small_cluster(), r, all);
  EXPECT_EQ(full.simulated_ranks().size(), 8u);
  for (const char* id : {"L0.bwd.grad.experts.allreduce.ep1.tp1", "L0.fwd.dispatch.tp1.dp1.c0",
                         "L0.fwd.dispatch.allgather.ep1.dp1.c0", "L0.fwd.dispatch.tp1.c0"})
    EXPECT_TRUE(full.find(id, -1).has_value()) << id;
  check_acyclic(full);
  BuildOptions replica;
  replica.representative_rank = false;
  EXPECT_EQ(build_moe_graph(small_model(), small_cluster(), r, replica).simulated_ranks(),
            (std::vector<int>{0, 1, 2, 3}));
}

TEST(TensorParallelGraph, NoGradientAllReduceOverAGroupOfOne) {
  RunSpec r = ted_run(8, 1);  // tp 8 x ep 1 x dp 1: nothing is replicated
  r.grad_sync = true;
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), r);
  EXPECT_TRUE(stream_ids(g, 0, StreamClass::kCommGrad).empty());
  RunSpec ep = small_run(1, OrderPolicy::kMPipeMoE, 8);  // EP over every GPU: only the gate
  ep.grad_sync = true;
  const TaskGraph e = build_moe_graph(small_model(), small_cluster(), ep);
  EXPECT_THAT(stream_ids(e, 0, StreamClass::kCommGrad), ElementsAre("L0.bwd.grad.dense.allreduce"));
}

}  // namespace
}  // namespace moesim
