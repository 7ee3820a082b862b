// Whole steps with imbalanced routing: every rank simulated with its own rows, all-to-allv
// collectives, the slowest rank setting the step, and agreement with uniform routing where the
// routed rows equal the padded ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "sim/driver/simulation.h"
#include "sim/graph/graph_json.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

struct Step {
  ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  RunSpec run;
  Step(const std::string& routing, int chunks = 4, MemoryStrategy s = MemoryStrategy::kNone) {
    run.tokens_per_gpu = 4096;  // top-1, E = 64, f = 1: k*B/E = C = 64 rows per (source, expert)
    run.num_chunks = chunks;
    run.strategy = s;
    run.routing = parse_routing_spec(routing, {});
  }
};

const GemmWork& gemm_of(const TaskGraph& g, const std::string& id, int rank) {
  return std::get<GemmWork>(g.task(*g.find(id, rank)).work);
}

const CollectiveWork& collective_of(const TaskGraph& g, const std::string& id) {
  return std::get<CollectiveWork>(g.task(*g.find(id, -1)).work);
}

TEST(RoutedStep, EveryRankGetsItsOwnRowsAndTheAllToAllsCarryTheTraffic) {
  Step s("zipf:1.1", 4, MemoryStrategy::kS2);
  const LayerDims dims = derive_layer_dims(s.model, s.cluster, s.run);
  const std::optional<RoutingPlan> plan = make_layer_routing(dims, s.run);
  ASSERT_TRUE(plan.has_value());
  const TaskGraph g = build_moe_graph(s.model, s.cluster, s.run, {}, &*plan);
  ASSERT_EQ(g.simulated_ranks().size(), 16u);  // representative_rank is ignored
  const std::int64_t M = dims.d_model, eb = dims.element_bytes;
  for (int r = 0; r < 16; ++r) {
    std::int64_t sent = 0;
    for (int c = 0; c < 4; ++c) {
      const std::int64_t rows = plan->received_rows(r, c);
      sent += plan->sent_rows(r, c);
      const GemmWork& fc1 = gemm_of(g, "L0.fwd.fc1.c" + std::to_string(c), r);
      EXPECT_EQ(fc1.batch, dims.local_experts);
      EXPECT_EQ(fc1.m, (rows + dims.local_experts - 1) / dims.local_experts);
      EXPECT_EQ(gemm_of(g, "L0.bwd.fc1.wgrad.c" + std::to_string(c), r).k, fc1.m);  // rows are its inner dimension
    }
    // Slot buffers hold the largest chunk; T_O and dT_O the rows the rank sent.
    std::int64_t largest = 0;
    for (int c = 0; c < 4; ++c) largest = std::max(largest, plan->received_rows(r, c));
    for (BufferId b = 0; b < g.num_buffers(); ++b) {
      const Buffer& buf = g.buffer(b);
      if (buf.rank != r) continue;
      if (buf.name == "L0.T_DI.slot0") {
        EXPECT_EQ(buf.bytes, largest * M * eb);
      }
      if (buf.name == "L0.T_O" || buf.name == "L0.dT_O") {
        EXPECT_EQ(buf.bytes, sent * M * eb) << buf.name;
      }
    }
  }
  // Dispatch-direction collectives read the chunk's matrix; their returns read it transposed.
  for (int c = 0; c < 4; ++c) {
    const std::string cc = ".c" + std::to_string(c);
    const CollectiveWork& d = collective_of(g, "L0.fwd.dispatch" + cc);
    ASSERT_TRUE(d.is_all_to_allv());
    EXPECT_FALSE(d.transposed);
    EXPECT_TRUE(collective_of(g, "L0.fwd.combine" + cc).transposed);
    EXPECT_FALSE(collective_of(g, "L0.bwd.combine" + cc).transposed);
    EXPECT_TRUE(collective_of(g, "L0.bwd.dispatch" + cc).transposed);
    EXPECT_FALSE(collective_of(g, "L0.bwd.redispatch" + cc).transposed);
    EXPECT_EQ(collective_of(g, "L0.fwd.combine" + cc).traffic, d.traffic);  // one matrix per chunk
    for (int a = 0; a < 16; a += 5)
      for (int b = 0; b < 16; b += 3) EXPECT_EQ(d.pair_bytes(a, b), plan->pair_rows(c, a, b) * M * eb);
  }
}

TEST(RoutedStep, EvenRoutingWithoutPaddingMatchesUniform) {
  // zipf:0 routes k*B/E = 64 = C rows per (source, expert): the same rows as the padded layout.
  for (const std::string network : {"flow", "alpha-beta"}) {
    Step u("uniform"), z("zipf:0");
    u.run.network = z.run.network = *parse_network_model(network);
    const SimulationResult ru = simulate_step(u.model, u.cluster, u.run);
    const SimulationResult rz = simulate_step(z.model, z.cluster, z.run);
    ASSERT_EQ(ru.graph.simulated_ranks().size(), 1u);
    ASSERT_EQ(rz.graph.simulated_ranks().size(), 16u);
    EXPECT_EQ(rz.routing.dropped, 0);
    EXPECT_NEAR(static_cast<double>(rz.metrics.step_ns) / static_cast<double>(ru.metrics.step_ns), 1.0, 0.01)
        << network;
    std::int64_t peak = 0;
    for (const RankMemory& m : rz.memory) peak = std::max(peak, m.peak_device_bytes);
    EXPECT_EQ(peak, ru.memory.front().peak_device_bytes) << network;
  }
}

class RoutedMatrix : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("moesim_routed_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".csv");
  }
  void TearDown() override { std::filesystem::remove(path_); }
  // One row for every rank: `hot` experts on rank `hot_rank` (4 local experts each) get weight w.
  std::string write_hot_rank(int hot_rank, double w) {
    std::ofstream out(path_);
    for (int e = 0; e < 64; ++e) out << (e ? "," : "") << (e / 4 == hot_rank ? w : 1.0);
    out << "\n";
    return path_.string();
  }
  std::filesystem::path path_;
};

TEST_F(RoutedMatrix, TheSlowestRankSetsTheStep) {
  Step s("uniform");
  s.model.capacity_factor = 4.0;  // room for the hot rank's extra rows: C = 256
  const SimulationResult uniform = simulate_step(s.model, s.cluster, s.run);
  s.run.routing = parse_routing_spec("matrix:" + write_hot_rank(5, 4.0), {});
  const SimulationResult hot = simulate_step(s.model, s.cluster, s.run);
  EXPECT_EQ(hot.routing.busiest_rank, 5);
  EXPECT_EQ(hot.metrics.rank, 5);
  EXPECT_GT(hot.routing.rank_imbalance, 2.0);
  EXPECT_EQ(hot.routing.dropped, 0);
  // Rank 5's expert GEMMs carry 4x the rows of a cold rank.
  const TaskRecord& fc1_hot = hot.trace.records[*hot.graph.find("L0.fwd.fc1.c0", 5)];
  const TaskRecord& fc1_cold = hot.trace.records[*hot.graph.find("L0.fwd.fc1.c0", 6)];
  EXPECT_GT(fc1_hot.end_ns - fc1_hot.start_ns, 2 * (fc1_cold.end_ns - fc1_cold.start_ns));
  // The step ends with the last task of any rank, and rank 5 holds the most memory.
  TimeNs last = 0;
  for (const TaskRecord& r : hot.trace.records) last = std::max(last, r.end_ns);
  EXPECT_EQ(hot.metrics.step_ns, last);
  const RankMemory* peak = &hot.memory.front();
  for (const RankMemory& m : hot.memory)
    if (m.peak_device_bytes > peak->peak_device_bytes) peak = &m;
  EXPECT_EQ(peak->rank, 5);
  // The padded uniform layout computes C rows per (source, expert) whatever the routing: with
  // f = 4 it does four times the routed work, and is slower than the hot routed step.
  EXPECT_GT(uniform.metrics.step_ns, hot.metrics.step_ns);
}

TEST(RoutedStep, EveryStrategyAndOrderRespectsDependenciesAndStreams) {
  for (MemoryStrategy st : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
                            MemoryStrategy::kS4}) {
    for (OrderPolicy order : {OrderPolicy::kSequential, OrderPolicy::kMPipeMoE, OrderPolicy::kFasterMoE,
                              OrderPolicy::kTutel}) {
      Step s("zipf:1.5", 2, st);
      s.run.order = order;
      s.run.slots = 1;
      const SimulationResult r = simulate_step(s.model, s.cluster, s.run);
      const std::string label = std::string(to_string(st)) + "/" + std::string(to_string(order));
      for (const auto& [from, to, kind] : r.graph.edges())
        ASSERT_LE(r.trace.records[from].end_ns, r.trace.records[to].start_ns) << label;
      TimeNs sum = 0, longest_stream = 0;
      std::map<std::pair<int, int>, TimeNs> busy;
      for (TaskIndex i = 0; i < r.graph.num_tasks(); ++i) {
        const TimeNs d = r.trace.records[i].end_ns - r.trace.records[i].start_ns;
        for (int rank : r.graph.ranks_of(i)) {
          sum += d;
          longest_stream = std::max(longest_stream, busy[{rank, static_cast<int>(r.graph.task(i).stream)}] += d);
        }
      }
      EXPECT_GE(r.metrics.step_ns, longest_stream) << label;
      EXPECT_LE(r.metrics.step_ns, sum) << label;
    }
  }
}

TEST(RoutedStep, GraphJsonKeepsTheTrafficMatrices) {
  Step s("zipf:0.9", 2, MemoryStrategy::kS4);
  const TaskGraph g = build_moe_graph(s.model, s.cluster, s.run);
  const std::string once = export_graph_json(g);
  EXPECT_NE(once.find("\"traffic\""), std::string::npos);
  const TaskGraph back = import_graph_json(once, "routed.json");
  EXPECT_TRUE(export_graph_json(back) == once);  // (a diff of this size would flood the log)
  const CollectiveWork& a = collective_of(g, "L0.bwd.dispatch.c1");
  const CollectiveWork& b = collective_of(back, "L0.bwd.dispatch.c1");
  EXPECT_TRUE(b.transposed);
  for (int x = 0; x < 16; ++x)
    for (int y = 0; y < 16; ++y) EXPECT_EQ(a.pair_bytes(x, y), b.pair_bytes(x, y));
  // The same step time from the re-imported graph.
  EXPECT_EQ(simulate_graph(g, s.cluster).trace.makespan_ns(), simulate_graph(back, s.cluster).trace.makespan_ns());
}

}  // namespace
}  // namespace moesim
