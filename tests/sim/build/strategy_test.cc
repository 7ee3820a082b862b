// MPipeMoE memory-reuse strategies (IPDPS'23 Table II) in the task graph: the per-chunk work
// vectors Q, acyclicity under every policy, the buffer discipline and the input validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"
#include "sim/build/moe_graph.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using moesim::testing::cluster_with_pcie;
using moesim::testing::kAllPolicies;
using moesim::testing::kAllStrategies;
using moesim::testing::small_cluster;
using moesim::testing::small_model;
using moesim::testing::small_run;


// MoE-GPT-S dimensions (M = 768, H = 4M), fp32, top-1, one local expert.
ModelSpec gpt_s() {
  ModelSpec m;
  m.name = "moe-gpt-s";
  m.d_model = 768;
  m.d_ffn = 3072;
  m.num_experts = 8;
  m.top_k = 1;
  m.capacity_factor = 1.0;
  m.dtype = DType::kFp32;
  m.gemm_dtype = DType::kFp32;
  return m;
}

struct Q {
  std::array<double, 3> fwd{};
  std::array<double, 3> bwd{};
};

// Per chunk: GEMM tasks, all-to-alls and memcpy units (bytes copied / (R/n * M * element_bytes)),
// counted on chunk c0 of the representative rank.
Q measure_q(const TaskGraph& g, const LayerDims& d) {
  const double unit = static_cast<double>(d.rows_per_chunk() * d.d_model * d.element_bytes);
  Q q;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Task& t = g.task(i);
    if (t.chunk != 0 || t.layer != 0) continue;
    auto& v = t.pass == Pass::kForward ? q.fwd : q.bwd;
    if (std::holds_alternative<GemmWork>(t.work)) v[0] += 1;
    if (const auto* c = std::get_if<CollectiveWork>(&t.work); c && c->op == CollectiveOp::kAllToAll) v[1] += 1;
    if (const auto* c = std::get_if<CopyWork>(&t.work)) v[2] += static_cast<double>(c->bytes) / unit;
  }
  return q;
}

TEST(StrategyGraph, WorkVectorsMatchMPipeMoETableII) {
  const std::map<MemoryStrategy, Q> expected = {
      {MemoryStrategy::kNone, {{2, 2, 0}, {4, 2, 0}}}, {MemoryStrategy::kS1, {{2, 2, 5}, {4, 2, 5}}},
      {MemoryStrategy::kS2, {{2, 2, 4}, {4, 3, 4}}},   {MemoryStrategy::kS3, {{2, 2, 1}, {5, 2, 1}}},
      {MemoryStrategy::kS4, {{2, 2, 0}, {5, 3, 0}}}};
  const ModelSpec model = gpt_s();
  const ClusterSpec cluster = cluster_with_pcie();
  for (const auto& [strategy, want] : expected) {
    for (int n : {1, 2, 4}) {
      RunSpec run = small_run(n);
      run.tokens_per_gpu = 256;
      run.strategy = strategy;
      const LayerDims d = derive_layer_dims(model, cluster, run);
      const TaskGraph g = build_moe_graph(model, cluster, run);
      const Q q = measure_q(g, d);
      for (int j = 0; j < 3; ++j) {
        EXPECT_DOUBLE_EQ(q.fwd[j], want.fwd[j]) << to_string(strategy) << " n=" << n << " fwd Q[" << j << "]";
        EXPECT_DOUBLE_EQ(q.bwd[j], want.bwd[j]) << to_string(strategy) << " n=" << n << " bwd Q[" << j << "]";
      }
    }
  }
}

TEST(StrategyGraph, AcyclicForEveryStrategyPolicyChunksAndSlots) {
  const ModelSpec model = small_model();
  const ClusterSpec cluster = cluster_with_pcie();
  for (MemoryStrategy s : kAllStrategies)
    for (OrderPolicy p : kAllPolicies)
      for (int n : {1, 2, 4, 8})
        for (int slots : {1, 2})
          for (bool representative : {true, false}) {
            RunSpec run = small_run(n, p);
            run.strategy = s;
            run.slots = slots;
            run.num_moe_layers = 2;
            const TaskGraph g = build_moe_graph(model, cluster, run, BuildOptions{representative});
            EXPECT_FALSE(find_cycle(g).has_value())
                << to_string(s) << " " << to_string(p) << " n=" << n << " slots=" << slots;
          }
}

// Every non-resident buffer is allocated by exactly one task and freed by exactly one task that
// runs after it (reachable in the graph), and the reuse edges exist as documented.
TEST(StrategyGraph, EveryBufferAllocatedAndFreedOnce) {
  const ModelSpec model = small_model();
  const ClusterSpec cluster = cluster_with_pcie();
  for (MemoryStrategy s : kAllStrategies) {
    for (OrderPolicy p : kAllPolicies) {
      RunSpec run = small_run(4, p);
      run.strategy = s;
      const TaskGraph g = build_moe_graph(model, cluster, run);
      std::vector<int> allocs(g.num_buffers()), frees(g.num_buffers());
      std::vector<TaskIndex> alloc_task(g.num_buffers()), free_task(g.num_buffers());
      for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
        for (BufferId b : g.task(i).allocates) ++allocs[b], alloc_task[b] = i;
        for (BufferId b : g.task(i).frees) ++frees[b], free_task[b] = i;
      }
      const std::vector<TaskIndex> topo = topological_order(g);
      std::vector<std::size_t> pos(g.num_tasks());
      for (std::size_t k = 0; k < topo.size(); ++k) pos[topo[k]] = k;
      for (BufferId b = 0; b < g.num_buffers(); ++b) {
        const Buffer& buf = g.buffer(b);
        if (buf.resident) {
          EXPECT_EQ(allocs[b] + frees[b], 0) << buf.name;
          continue;
        }
        ASSERT_EQ(allocs[b], 1) << to_string(s) << " " << buf.name;
        ASSERT_EQ(frees[b], 1) << to_string(s) << " " << buf.name;
        // Allocation at start and release at end: the same task may do both (a temporary).
        EXPECT_LE(pos[alloc_task[b]], pos[free_task[b]]) << to_string(s) << " " << buf.name;
      }
    }
  }
}

// With s1-s4, T_DI / T_DO (`slots` slots) and T_M (1 slot) live in slot buffers
// `L{l}.<tensor>.slot{s}`, each allocated once by the first task writing it and freed with the
// layer's saved activations by bwd.gate.wgrad; the backward restores write into the same slots, so
// there are no per-chunk or backward-only copies of these tensors.
TEST(StrategyGraph, ReusedTensorsLiveInSlotBuffers) {
  const ModelSpec model = small_model();
  const ClusterSpec cluster = cluster_with_pcie();
  for (MemoryStrategy s : kAllStrategies) {
    if (s == MemoryStrategy::kNone) continue;
    for (OrderPolicy p : kAllPolicies) {
      for (int n : {1, 2, 4}) {
        for (int slots : {1, 2}) {
          SCOPED_TRACE(std::string(to_string(s)) + " " + std::string(to_string(p)) + " n=" + std::to_string(n) +
                       " slots=" + std::to_string(slots));
          RunSpec run = small_run(n, p);
          run.strategy = s;
          run.slots = slots;
          run.num_moe_layers = 2;
          const TaskGraph g = build_moe_graph(model, cluster, run);
          std::vector<int> allocs(g.num_buffers()), frees(g.num_buffers());
          std::vector<TaskIndex> free_task(g.num_buffers());
          for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
            for (BufferId b : g.task(i).allocates) ++allocs[b];
            for (BufferId b : g.task(i).frees) ++frees[b], free_task[b] = i;
          }
          for (int l = 0; l < 2; ++l) {
            const std::string layer = "L" + std::to_string(l) + ".";
            std::map<std::string, int> count;
            for (BufferId b = 0; b < g.num_buffers(); ++b) {
              const Buffer& buf = g.buffer(b);
              if (buf.rank != 0 || buf.name.rfind(layer, 0) != 0) continue;
              for (const std::string tensor : {"T_DI", "T_M", "T_DO"}) {
                EXPECT_NE(buf.name.rfind(layer + tensor + ".c", 0), 0u) << buf.name;
                EXPECT_NE(buf.name.rfind(layer + "bwd." + tensor, 0), 0u) << buf.name;
                if (buf.name.rfind(layer + tensor + ".slot", 0) != 0) continue;
                ++count[tensor];
                EXPECT_EQ(buf.category, MemoryCategory::kActivations) << buf.name;
                EXPECT_EQ(allocs[b], 1) << buf.name;
                ASSERT_EQ(frees[b], 1) << buf.name;
                EXPECT_EQ(g.task(free_task[b]).id, layer + "bwd.gate.wgrad") << buf.name;
              }
            }
            // T_DI's slots are shared by the forward chunks and the backward restores.
            EXPECT_EQ(count["T_DI"], std::min(slots, 2 * n));
            EXPECT_EQ(count["T_M"], 1);
            EXPECT_EQ(count["T_DO"], std::min(slots, n));
          }
        }
      }
    }
  }
}

TEST(StrategyGraph, ReuseEdgesBoundTheLiveChunkBuffers) {
  const ModelSpec model = small_model();
  const ClusterSpec cluster = cluster_with_pcie();
  RunSpec run = small_run(4);
  run.strategy = MemoryStrategy::kS1;
  run.slots = 2;
  const TaskGraph g = build_moe_graph(model, cluster, run);
  auto has_edge = [&](const std::string& from, int from_rank, const std::string& to, int to_rank) {
    const TaskIndex f = *g.find(from, from_rank), t = *g.find(to, to_rank);
    for (const auto& [a, b, kind] : g.edges())
      if (a == f && b == t) return kind == DepKind::kReuse;
    return false;
  };
  // T_DI: the dispatch of chunk 2 waits for the offload that releases chunk 0's buffer.
  EXPECT_TRUE(has_edge("L0.fwd.offload.T_DI.c0", 0, "L0.fwd.dispatch.c2", -1));
  // T_M has one slot: FC1 of chunk 1 waits for the offload of chunk 0's T_M.
  EXPECT_TRUE(has_edge("L0.fwd.offload.T_M.c0", 0, "L0.fwd.fc1.c1", 0));
  // T_DO: FC2 of chunk 2 waits for the combine that sends chunk 0.
  EXPECT_TRUE(has_edge("L0.fwd.combine.c0", -1, "L0.fwd.fc2.c2", 0));
  // Backward restored buffers.
  EXPECT_TRUE(has_edge("L0.bwd.fc2.wgrad.c0", 0, "L0.bwd.prefetch.T_M.c1", 0));
  EXPECT_TRUE(has_edge("L0.bwd.fc1.wgrad.c0", 0, "L0.bwd.prefetch.T_DI.c2", 0));
}

TEST(StrategyGraph, StrategyTasksHaveTheirStagesAndStreams) {
  const ModelSpec model = small_model();
  const ClusterSpec cluster = cluster_with_pcie();
  struct Want {
    MemoryStrategy s;
    std::string id;
    int rank;
    std::string stage;
    StreamClass stream;
  };
  const std::vector<Want> wants = {
      {MemoryStrategy::kS1, "L0.fwd.offload.T_DI.c1", 0, "offload", StreamClass::kCopyD2H},
      {MemoryStrategy::kS1, "L0.bwd.prefetch.T_M.c1", 0, "prefetch", StreamClass::kCopyH2D},
      {MemoryStrategy::kS2, "L0.bwd.redispatch.c1", -1, "redispatch", StreamClass::kCommDispatch},
      {MemoryStrategy::kS3, "L0.bwd.recompute.fc1.c1", 0, "recompute", StreamClass::kCompute},
      {MemoryStrategy::kS4, "L0.bwd.recompute.act.c1", 0, "recompute", StreamClass::kCompute},
  };
  for (const Want& w : wants) {
    RunSpec run = small_run(2);
    run.strategy = w.s;
    const TaskGraph g = build_moe_graph(model, cluster, run);
    const auto i = g.find(w.id, w.rank);
    ASSERT_TRUE(i.has_value()) << w.id;
    EXPECT_EQ(g.task(*i).stage, w.stage);
    EXPECT_EQ(g.task(*i).stream, w.stream);
  }
}

TEST(StrategyGraph, RejectsBadSlots) {
  RunSpec run = small_run(2);
  run.slots = 3;
  try {
    derive_layer_dims(small_model(), small_cluster(), run);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("slots must be 1 or 2"));
    EXPECT_THAT(e.what(), HasSubstr("got 3"));
  }
}

TEST(StrategyGraph, OffloadNeedsPcie) {
  for (MemoryStrategy s : {MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3}) {
    RunSpec run = small_run(2);
    run.strategy = s;
    try {
      derive_layer_dims(small_model(), small_cluster(), run);
      FAIL() << "expected InputError for " << to_string(s);
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("offload needs a node file with a pcie section"));
    }
  }
  // s4 neither offloads nor prefetches: no PCIe needed.
  RunSpec run = small_run(2);
  run.strategy = MemoryStrategy::kS4;
  EXPECT_NO_THROW(build_moe_graph(small_model(), small_cluster(), run));
}

// swiglu saves FC1's 2H-wide output as T_M (its backward needs both halves) and carries FC2's
// input gradient dA (H wide) from fc2.dgrad to act in a temporary per chunk.
TEST(StrategyGraph, SwigluSavesFc1OutputAndCarriesDaPerChunk) {
  ModelSpec model = small_model();
  model.activation = Activation::kSwiglu;
  const ClusterSpec cluster = cluster_with_pcie();
  for (MemoryStrategy s : kAllStrategies) {
    RunSpec run = small_run(2);
    run.strategy = s;
    const TaskGraph g = build_moe_graph(model, cluster, run);
    const LayerDims d = derive_layer_dims(model, cluster, run);
    const std::int64_t chunk_rows = d.rows_per_chunk(), eb = model.element_bytes();
    const TaskIndex dgrad = *g.find("L0.bwd.fc2.dgrad.c1", 0);
    const TaskIndex act = *g.find("L0.bwd.act.c1", 0);
    bool found = false;
    for (BufferId b : g.task(dgrad).allocates) {
      if (g.buffer(b).name != "L0.bwd.dA.c1") continue;
      found = true;
      EXPECT_EQ(g.buffer(b).category, MemoryCategory::kTemporary);
      EXPECT_EQ(g.buffer(b).bytes, chunk_rows * model.d_ffn * eb);
      EXPECT_THAT(g.task(act).frees, ::testing::Contains(b));
    }
    EXPECT_TRUE(found) << to_string(s);
    for (BufferId b = 0; b < g.num_buffers(); ++b) {
      const Buffer& buf = g.buffer(b);
      if (buf.rank != 0) continue;
      const std::int64_t full = 2 * chunk_rows * 2 * model.d_ffn * eb, slot = chunk_rows * 2 * model.d_ffn * eb;
      if (buf.name == "L0.T_M" || buf.name == "L0.dM" || buf.name == "L0.host.T_M") {
        EXPECT_EQ(buf.bytes, full) << buf.name;
      }
      if (buf.name == "L0.T_M.slot0" || buf.name == "L0.dM.slot0") {
        EXPECT_EQ(buf.bytes, slot) << buf.name;
      }
      EXPECT_EQ(buf.name.find("preact"), std::string::npos) << buf.name;
    }
  }
}

}  // namespace
}  // namespace moesim
