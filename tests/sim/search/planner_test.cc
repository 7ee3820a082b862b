// The planner on a hardware file whose costs are pure alpha-beta with one communication channel
// (hardware/clusters/pipemoe-alpha-beta.yaml), where the simulator, an independent list schedule
// written here, and the PipeMoE model can be compared exactly; plus ranking, the other methods, and
// which methods take a tensor-parallel layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/search/planner.h"
#include "sim/spec/loader.h"

namespace moesim::search {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

struct Fixture {
  ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/pipemoe-alpha-beta.yaml");
  RunSpec run = [] {
    RunSpec r;
    r.tokens_per_gpu = 4096;  // C = 64: every r below divides it, so chunks are exact
    return r;
  }();
};

const std::vector<int> kDegrees = {1, 2, 4, 8, 16};

TimeNs task_time(const TaskGraph& g, const Trace& tr, const std::string& id, bool end) {
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    if (g.task(i).id == id) return end ? tr.records[i].end_ns : tr.records[i].start_ns;
  }
  ADD_FAILURE() << "no task " << id;
  return 0;
}

// Simulated span of the forward pipeline: first dispatch start to last combine end.
TimeNs forward_pipeline_ns(const Fixture& f, int r) {
  RunSpec run = f.run;
  run.num_chunks = r;
  const SimulationResult s = simulate_step(f.model, f.cluster, run);
  return task_time(s.graph, s.trace, "L0.fwd.combine.c" + std::to_string(r - 1), true) -
         task_time(s.graph, s.trace, "L0.fwd.dispatch.c0", false);
}

TEST(PlannerTest, PureAlphaBetaForwardIsThePipeMoeModel) {
  const Fixture f;
  const PipeMoeSetup setup = pipemoe_setup(f.model, f.cluster, f.run);
  EXPECT_EQ(setup.source, "alpha_beta section");
  for (int r : kDegrees) {
    const double model_ns = pipelined_time_s(setup.params, r) * 1e9;
    // Each task is rounded to a whole ns: at most 0.5 ns per task on the path (2r + 2r GEMMs).
    EXPECT_NEAR(static_cast<double>(forward_pipeline_ns(f, r)), model_ns, 2.0 * r + 2) << "r = " << r;
  }
}

// An independent list schedule of one MoE layer step on two in-order resources (one comm channel,
// one compute stream), with the costs of the alpha_beta section: elementwise kernels are free, the
// gate GEMM precedes the forward pipeline and its two backward GEMMs follow the backward one.
// Forward comm order: all dispatches, then all combines; backward: G1 | G2 D1 | ... | Dn.
TimeNs list_schedule_step(const Fixture& f, int r) {
  const AlphaBetaCosts& ab = *f.cluster.alpha_beta;
  RunSpec run = f.run;
  run.num_chunks = r;
  const LayerDims d = derive_layer_dims(f.model, f.cluster, run);
  const auto gemm = [&](double flops) { return static_cast<TimeNs>(std::llround((ab.gemm_alpha_s + ab.gemm_beta_s_per_flop * flops) * 1e9)); };
  const double rows = static_cast<double>(d.rows_per_expert_chunk()) * d.local_experts;
  const double fc = 2.0 * rows * static_cast<double>(d.d_model) * static_cast<double>(d.d_ffn);
  const TimeNs a2a = static_cast<TimeNs>(
      std::llround((ab.a2a_alpha_s + ab.a2a_beta_s_per_byte * static_cast<double>(d.a2a_bytes_per_peer() * d.ep_size)) * 1e9));
  const TimeNs gate = gemm(2.0 * static_cast<double>(d.tokens * d.d_model * d.num_experts));
  // Runs one pass: `order` lists (second?, chunk) on the channel; compute of a chunk (`e` ns) waits
  // for its first collective and the previous chunk's compute; its second collective waits for it.
  const auto pass = [&](TimeNs t0, const std::vector<std::pair<bool, int>>& order, TimeNs e) {
    std::vector<TimeNs> first_end(static_cast<std::size_t>(r)), compute_end(static_cast<std::size_t>(r));
    TimeNs channel = t0, compute = t0, last = t0;
    for (const auto& [second, c] : order) {
      const auto i = static_cast<std::size_t>(c);
      if (!second) {
        channel += a2a;
        first_end[i] = channel;
        compute = std::max(compute, first_end[i]) + e;
        compute_end[i] = compute;
      } else {
        channel = std::max(channel, compute_end[i]) + a2a;
        last = channel;
      }
    }
    return last;
  };
  std::vector<std::pair<bool, int>> fwd, bwd;
  for (int i = 0; i < r; ++i) fwd.emplace_back(false, i);
  for (int i = 0; i < r; ++i) fwd.emplace_back(true, i);
  for (int j = 0; j <= r; ++j) {
    if (j < r) bwd.emplace_back(false, j);
    if (j > 0) bwd.emplace_back(true, j - 1);
  }
  const TimeNs e_fwd = 2 * gemm(fc);
  const TimeNs e_bwd = 4 * gemm(fc);
  const TimeNs fwd_end = pass(gate, fwd, e_fwd);
  return pass(fwd_end, bwd, e_bwd) + 2 * gate;
}

TEST(PlannerTest, ExhaustiveSimulateFindsTheListScheduleOptimum) {
  Fixture f;
  PlanRequest req;
  req.model = f.model;
  req.cluster = f.cluster;
  req.run = f.run;
  req.tokens = {4096};
  req.chunk_counts = kDegrees;
  req.strategies = {MemoryStrategy::kNone};
  req.methods = {PlanMethod::kSimulate, PlanMethod::kPipeMoE};
  resolve_plan_request(req);
  const PlanReport report = plan(req, "test");
  const PlanTable& t = report.tables.at(0);

  // Brute force over the list schedule.
  int best_r = 0;
  TimeNs best = 0;
  for (int r : kDegrees) {
    const TimeNs ls = list_schedule_step(f, r);
    const auto row = std::find_if(t.rows.begin(), t.rows.end(), [&](const PlanRow& x) { return x.num_chunks == r; });
    ASSERT_NE(row, t.rows.end());
    EXPECT_EQ(row->step_ns, ls) << "r = " << r;  // the simulator is exactly this list schedule
    if (best_r == 0 || ls < best) {
      best = ls;
      best_r = r;
    }
  }
  ASSERT_GE(t.best, 0);
  EXPECT_EQ(t.rows[static_cast<std::size_t>(t.best)].num_chunks, best_r);
  EXPECT_EQ(t.rows[static_cast<std::size_t>(t.best)].step_ns, best);
  ASSERT_EQ(t.picks.size(), 2u);
  EXPECT_EQ(t.picks[0].method, "simulate");
  EXPECT_EQ(t.picks[0].loss_ns, 0);
  // The model's pick (forward only) is reported with its loss on the whole step.
  const MethodPick& model = t.picks[1];
  EXPECT_EQ(model.method, "pipemoe");
  EXPECT_EQ(model.num_chunks, pipemoe_pick(pipemoe_setup(f.model, f.cluster, f.run).params, kDegrees).degree);
  EXPECT_EQ(model.loss_ns, list_schedule_step(f, model.num_chunks) - best);
  EXPECT_GE(model.loss_ns, 0);
}

TEST(PlannerTest, PipeMoePickIsTheExactMinimiserOverTheSet) {
  PipeMoeParams p;
  p.a2a_alpha_s = 20e-6;
  p.a2a_beta_s_per_byte = 1.0 / 50e9;
  p.expert_alpha_s = 40e-6;
  p.expert_beta_s_per_unit = 1e-14;
  p.dispatch_bytes = 12.5e6;  // b_a*n_d = 250 us
  p.expert_work = 39e9;       // b_e*n_e = 390 us
  // T3(r) = 40 + 390 + 500/r + 40 r (us) for r >= 2 while it dominates: 3 -> 716.7, 4 -> 715.0,
  // 5 -> 730.0; T4(r) = 40 r + 500 stays below. Minimum at r = 4.
  EXPECT_EQ(pipemoe_pick(p, {1, 2, 3, 4, 5, 6, 7, 8}).degree, 4);
  EXPECT_EQ(pipemoe_pick(p, {1, 2, 3, 4, 5, 6, 7, 8}).regime, PipeMoeRegime::kT3ComputeOverall);
  EXPECT_NEAR(pipemoe_pick(p, {1, 2, 3, 4}).time_s, 715e-6, 1e-12);
  // Restricted to a set without 4, the best member (3), not a rounded continuous optimum.
  EXPECT_EQ(pipemoe_pick(p, {1, 2, 3, 5, 8}).degree, 3);
  EXPECT_EQ(pipemoe_pick(p, {1}).degree, 1);
}

TEST(PlannerTest, FittedConstantsReproduceTheCostModels) {
  const ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  RunSpec run;
  run.tokens_per_gpu = 4096;
  const PipeMoeSetup s = pipemoe_setup(model, cluster, run);
  EXPECT_NE(s.source.find("fitted"), std::string::npos);
  // The alpha-beta network is linear in bytes: the fit recovers its latency and bandwidth (16 GPUs
  // over two nodes: 8 peers across the NIC dominate; latency NCCL's 8.4 us and 15 rounds of peers,
  // each with a pair across the nodes, at 5 us).
  EXPECT_NEAR(s.params.a2a_alpha_s, 8.4e-6 + 15 * 5e-6, 1e-8);
  EXPECT_GT(s.params.a2a_beta_s_per_byte, 0);
  EXPECT_GT(s.params.expert_beta_s_per_unit, 0);
  EXPECT_GE(s.params.expert_alpha_s, 0);
}

TEST(PlannerTest, RankingByObjective) {
  const auto row = [](int n, TimeNs step, std::int64_t peak, bool fits) {
    PlanRow r;
    r.num_chunks = n;
    r.step_ns = step;
    r.forward_ns = 1000 - step;  // the forward order is the reverse of the step's
    r.peak_bytes = peak;
    r.model_peak_bytes = peak;  // ranking and fitting read the whole model's peak
    r.fits = fits;
    return r;
  };
  const std::vector<PlanRow> rows = {row(1, 100, 50, true), row(2, 60, 90, true), row(3, 50, 10, false),
                                     row(4, 80, 40, true)};
  std::vector<PlanRow> by_time = rows;
  EXPECT_EQ(rank_rows(by_time, PlanObjective::kTime), 0);
  EXPECT_EQ(by_time[0].num_chunks, 2);      // fastest that fits; n = 3 is faster but does not fit
  EXPECT_EQ(by_time.back().num_chunks, 3);  // rows that do not fit rank last
  std::vector<PlanRow> by_memory = rows;
  rank_rows(by_memory, PlanObjective::kMemory);
  EXPECT_EQ(by_memory[0].num_chunks, 4);
  std::vector<PlanRow> balanced = rows;
  rank_rows(balanced, PlanObjective::kBalanced);
  EXPECT_EQ(balanced[0].num_chunks, 4);  // 80*40 = 3200 < 100*50 < 60*90
  std::vector<PlanRow> by_forward = rows;
  EXPECT_EQ(rank_rows(by_forward, PlanObjective::kForward), 0);
  EXPECT_EQ(by_forward[0].num_chunks, 1);  // forward 900 - 100: the slowest step, the fastest forward
  EXPECT_EQ(by_forward.back().num_chunks, 3);
  std::vector<PlanRow> none = {row(1, 10, 10, false)};
  EXPECT_EQ(rank_rows(none, PlanObjective::kTime), -1);
}

// Objective forward judges the PipeMoE model on the quantity it predicts: on the hardware whose
// simulation is the model's world (pipemoe-alpha-beta.yaml), its pick is the simulated best
// forward pass, over every degree 1..16 (uneven chunks included), while under objective time
// (the whole step, which the model does not describe) it may lose.
TEST(PlannerTest, ObjectiveForwardJudgesThePipeMoePickOnTheForwardPass) {
  const Fixture f;
  PlanRequest req;
  req.model = f.model;
  req.cluster = f.cluster;
  req.tokens = {4096, 32768};
  req.strategies = {MemoryStrategy::kNone};
  req.methods = {PlanMethod::kSimulate, PlanMethod::kPipeMoE};
  req.objective = PlanObjective::kForward;
  req.jobs = 1;
  resolve_plan_request(req);
  ASSERT_EQ(req.chunk_counts.size(), 16u);
  const PlanReport report = plan(req, "test");
  for (const PlanTable& t : report.tables) {
    ASSERT_GE(t.best, 0);
    const PlanRow& best = t.rows[static_cast<std::size_t>(t.best)];
    for (const PlanRow& r : t.rows) EXPECT_GE(r.forward_ns, best.forward_ns) << "B = " << t.tokens;
    ASSERT_EQ(t.picks.size(), 2u);
    EXPECT_EQ(t.picks[1].method, "pipemoe");
    EXPECT_EQ(t.picks[1].num_chunks, best.num_chunks) << "B = " << t.tokens;
    EXPECT_EQ(t.picks[1].loss_ns, 0);
    EXPECT_EQ(t.picks[1].forward_ns, best.forward_ns);
  }
}

TEST(PlannerTest, OnlineReplayKeepsItsInvariantsAndSpendsFewerTrials) {
  PlanRequest req;
  req.model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  req.cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  req.tokens = {2048, 4096, 8192, 4096, 16384, 2048, 6144};
  req.chunk_counts = {1, 2, 3, 4, 5, 6, 7, 8};
  req.strategies = {MemoryStrategy::kNone, MemoryStrategy::kS4};
  req.methods = {PlanMethod::kOnline};
  resolve_plan_request(req);
  const PlanReport r = plan(req, "test");
  ASSERT_TRUE(r.has_online);
  EXPECT_EQ(r.online.cache_hits, 2);  // 4096 and 2048 again
  EXPECT_LT(static_cast<std::int64_t>(r.online.trials.size()), r.online.exhaustive_trials);
  for (std::size_t i = 1; i < r.online.ranges.size(); ++i) {
    EXPECT_LT(r.online.ranges[i - 1].hi, r.online.ranges[i].lo);
    EXPECT_LE(r.online.ranges[i - 1].num_chunks, r.online.ranges[i].num_chunks);
  }
  for (const PlanTable& t : r.tables) {
    const auto online = std::find_if(t.picks.begin(), t.picks.end(), [](const MethodPick& p) { return p.method == "mpipemoe-online"; });
    ASSERT_NE(online, t.picks.end());
    EXPECT_GE(online->loss_ns, 0);
  }
}

TEST(PlannerTest, BadRequestsFailBeforeAnySimulation) {
  PlanRequest req;
  req.model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  req.cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  req.tokens = {256};  // C = 4
  req.chunk_counts = {1, 8};
  try {
    resolve_plan_request(req);
    FAIL() << "n above capacity accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("n = 8"), std::string::npos) << e.what();
  }
  req.chunk_counts.clear();
  resolve_plan_request(req);
  // The default: every degree up to the capacity C = 4 (3 splits it into chunks of 2, 1, 1).
  EXPECT_EQ(req.chunk_counts, (std::vector<int>{1, 2, 3, 4}));
}

TEST(PlannerTest, FitFindsTheSmallestClusterThatFits) {
  PlanRequest req;
  req.model = load_model_spec(kRoot + "/models/moe-gpt-xl-64e.yaml");
  req.cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  req.run.num_moe_layers = 1;
  req.tokens = {4096};
  req.chunk_counts = {1, 2, 4};
  req.strategies = {MemoryStrategy::kNone, MemoryStrategy::kS4};
  resolve_plan_request(req);
  // Shrink the GPU so that one node cannot hold 8 of the 64 experts' states but two nodes can.
  RunSpec probe = req.run;
  probe.tokens_per_gpu = 4096;
  req.cluster.num_nodes = 1;
  const PlanRow one = evaluate_configuration(req.model, req.cluster, [&] { RunSpec r = probe; r.strategy = MemoryStrategy::kS4; r.num_chunks = 4; return r; }());
  req.cluster.num_nodes = 2;
  const PlanRow two = evaluate_configuration(req.model, req.cluster, [&] { RunSpec r = probe; r.strategy = MemoryStrategy::kS4; r.num_chunks = 4; return r; }());
  ASSERT_GT(one.model_peak_bytes, two.model_peak_bytes);
  req.cluster.node.gpu.hbm_capacity_bytes = (one.model_peak_bytes + two.model_peak_bytes) / 2;
  const FitReport fit = fit_cluster(req, 8, 0);
  ASSERT_GE(fit.answer, 0);
  EXPECT_EQ(fit.steps[static_cast<std::size_t>(fit.answer)].num_nodes, 2);
  EXPECT_FALSE(fit.steps[0].found);
  // A step target no size can meet: no answer, every size up to the limit tried.
  const FitReport never = fit_cluster(req, 3, 1);
  EXPECT_EQ(never.answer, -1);
  EXPECT_EQ(never.steps.size(), 3u);
}

// With tensor parallelism: the analytical methods are refused (they model one expert-parallel
// channel), the simulating ones run the layout, and the default degrees keep every chunk's rows
// whole on each tensor-parallel rank.
PlanRequest tensor_parallel_request(int tp, bool dtd) {
  PlanRequest req;
  req.model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  req.cluster = load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  req.run.tp_size = tp;
  req.run.drop_duplicate_tokens = dtd;
  req.run.network = NetworkModel::kAlphaBeta;
  req.tokens = {2048};  // C = 2048 / 64 = 32
  req.strategies = {MemoryStrategy::kNone};
  return req;
}

TEST(PlannerTest, AnalyticalMethodsAreRefusedWithTensorParallelism) {
  for (const auto& [methods, named] :
       {std::make_pair(std::vector<PlanMethod>{PlanMethod::kPipeMoE}, std::string("pipemoe")),
        std::make_pair(std::vector<PlanMethod>{PlanMethod::kMpmoeModel}, std::string("mpmoe-model")),
        std::make_pair(std::vector<PlanMethod>{PlanMethod::kSimulate, PlanMethod::kPipeMoE, PlanMethod::kOnline,
                                               PlanMethod::kMpmoeModel},
                       std::string("pipemoe and mpmoe-model"))}) {
    PlanRequest req = tensor_parallel_request(2, true);
    req.methods = methods;
    try {
      resolve_plan_request(req);
      ADD_FAILURE() << named;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--tp 2: the method(s) " + named + " describe expert parallelism only"),
                std::string::npos)
          << e.what();
    }
  }
  PlanRequest req = tensor_parallel_request(2, true);
  req.methods = {PlanMethod::kOnline};
  EXPECT_NO_THROW(resolve_plan_request(req));
  req = tensor_parallel_request(1, true);
  req.methods = {PlanMethod::kPipeMoE, PlanMethod::kMpmoeModel};
  EXPECT_NO_THROW(resolve_plan_request(req));
}

TEST(PlannerTest, DefaultDegreesAreEveryDegreeUpToSixteenWithOrWithoutDropping) {
  // C = 32: every n in 1..16 keeps at least one slot per chunk. With duplicate token dropping the
  // chunks that the 8 ranks do not divide are padded (LayerDims::shared_chunk_capacity), not cut.
  std::vector<int> all;
  for (int n = 1; n <= 16; ++n) all.push_back(n);
  for (bool dtd : {true, false}) {
    PlanRequest req = tensor_parallel_request(8, dtd);
    resolve_plan_request(req);
    EXPECT_EQ(req.chunk_counts, all) << "dtd " << dtd;
  }
}

TEST(PlannerTest, TensorParallelPlanRowsAreSimulatedSteps) {
  PlanRequest req = tensor_parallel_request(4, true);
  req.methods = {PlanMethod::kSimulate, PlanMethod::kOnline};
  resolve_plan_request(req);
  const PlanReport report = plan(req, "test");
  EXPECT_EQ(report.layout.tp, 4);
  EXPECT_EQ(report.layout.ep, 16);
  EXPECT_EQ(report.layout.dp, 1);
  EXPECT_TRUE(report.drop_duplicate_tokens);
  ASSERT_EQ(report.tables.size(), 1u);
  EXPECT_EQ(report.tables[0].global_tokens, 16 * 2048);
  for (const PlanRow& row : report.tables[0].rows) {
    RunSpec run = req.run;
    run.tokens_per_gpu = 2048;
    run.num_chunks = row.num_chunks;
    run.strategy = row.strategy;
    EXPECT_EQ(row.step_ns, simulate_step(req.model, req.cluster, run).metrics.step_ns) << "n " << row.num_chunks;
  }
  ASSERT_EQ(report.tables[0].picks.size(), 2u);
  EXPECT_EQ(report.tables[0].picks[1].method, "mpipemoe-online");
  EXPECT_TRUE(report.tables[0].picks[1].found);
}

}  // namespace
}  // namespace moesim::search
