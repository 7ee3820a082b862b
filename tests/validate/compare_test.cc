// The validator on reports the simulator writes: the same layer under two network models, one
// rank against every rank, and reports of different layers (rejected with the key).
#include "validate/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/build/moe_graph.h"
#include "sim/report/metrics.h"
#include "sim/report/report.h"
#include "sim/spec/loader.h"

namespace moesim::validate {
namespace {

using Json = nlohmann::json;

// `moesim simulate --json` of MoE-GPT-S on one DGX-A100 node (8 ranks), as a parsed report.
Json simulate(int chunks, NetworkModel network, bool all_ranks) {
  const std::string root = MOESIM_SOURCE_DIR;
  const ModelSpec model = load_model_spec(root + "/models/moe-gpt-s-64e.yaml");
  const ClusterSpec cluster = load_hardware_spec(root + "/hardware/nodes/dgx-a100.yaml");
  RunSpec run;
  run.tokens_per_gpu = 2048;
  run.num_chunks = chunks;
  run.network = network;
  BuildOptions options;
  options.representative_rank = !all_ranks;
  const LayerDims dims = derive_layer_dims(model, cluster, run);
  const TaskGraph graph = build_moe_graph(model, cluster, run, build_options_for(cluster, options));
  const EngineRun result = simulate_graph(graph, cluster, NetworkChoice{run.network, run.all_to_all});
  const StepMetrics metrics = compute_step_metrics(graph, result.trace);
  const ReportInputs in{model, cluster, run, dims, graph, result.trace, metrics, result.memory, "test",
                        std::string(to_string(network))};
  return Json::parse(report_json(in));
}

std::string error_of(const Json& a, const Json& b) {
  try {
    compare_reports(a, "a.json", b, "b.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Compare, AReportAgainstItselfHasNoError) {
  const Json r = simulate(2, NetworkModel::kFlow, false);
  const Comparison c = compare_reports(r, "a.json", r, "a.json");
  EXPECT_EQ(c.step.relative_error(), 0.0);
  EXPECT_EQ(c.stage_mean_abs_error(), 0.0);
  EXPECT_EQ(c.task_median_abs_error(), 0.0);
  EXPECT_EQ(c.tasks.size(), r["tasks"].size());
  EXPECT_EQ(c.stages.size(), r["stages"].size());
  EXPECT_TRUE(c.notes.empty());
}

TEST(Compare, TwoNetworkModelsGiveTheirOwnFiguresSideBySide) {
  const Json a = simulate(4, NetworkModel::kAlphaBeta, false);
  const Json b = simulate(4, NetworkModel::kFlow, false);
  const Comparison c = compare_reports(a, "ab.json", b, "flow.json");
  EXPECT_DOUBLE_EQ(c.step.reference_us, a["step_time_us"].get<double>());
  EXPECT_DOUBLE_EQ(c.step.predicted_us, b["step_time_us"].get<double>());
  EXPECT_DOUBLE_EQ(c.step.relative_error(),
                   (b["step_time_us"].get<double>() - a["step_time_us"].get<double>()) / a["step_time_us"].get<double>());
  EXPECT_EQ(c.reference_kind, "alpha-beta");
  EXPECT_EQ(c.predicted_kind, "flow");
  // Every task matched by (id, rank), with each file's own duration.
  ASSERT_EQ(c.tasks.size(), a["tasks"].size());
  const Json& t0 = a["tasks"][0];
  EXPECT_EQ(c.tasks[0].id, t0["id"].get<std::string>());
  EXPECT_DOUBLE_EQ(c.tasks[0].duration.reference_us, t0["end_us"].get<double>() - t0["start_us"].get<double>());
  for (const StageRow& s : c.stages) {
    EXPECT_DOUBLE_EQ(s.busy.reference_us, a["stages"][s.stage]["busy_us"].get<double>()) << s.stage;
    EXPECT_DOUBLE_EQ(s.busy.predicted_us, b["stages"][s.stage]["busy_us"].get<double>()) << s.stage;
  }
  // Compute is modelled the same way in both (up to the interference of whatever overlaps it),
  // and so are these all-to-alls: both models run them as NCCL does, with the same latency, and
  // without contention beyond what both account for they agree.
  bool dispatch_seen = false;
  for (const StageRow& s : c.stages) {
    if (s.stage == "fwd.fc1" || s.stage == "fwd.fc2" || s.stage == "fwd.dispatch") {
      EXPECT_LT(std::abs(s.busy.relative_error()), 0.05) << s.stage;
    }
    dispatch_seen = dispatch_seen || s.stage == "fwd.dispatch";
  }
  EXPECT_TRUE(dispatch_seen);
  const std::string text = comparison_text(c, 3);
  EXPECT_NE(text.find("step time"), std::string::npos);
  EXPECT_NE(text.find("largest task differences"), std::string::npos);
  const std::string csv = comparison_csv(c);
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')), c.tasks.size() + 1);
  const Json j = Json::parse(comparison_json(c));
  EXPECT_EQ(j["tasks"].size(), c.tasks.size());
  EXPECT_DOUBLE_EQ(j["step"]["relative_error"].get<double>(), c.step.relative_error());
}

TEST(Compare, EveryRankAgainstOneRankComparesTheCommonRankWithANote) {
  const Json all = simulate(2, NetworkModel::kFlow, true);
  const Json one = simulate(2, NetworkModel::kFlow, false);
  const Comparison c = compare_reports(all, "all.json", one, "one.json");
  EXPECT_EQ(c.tasks.size(), one["tasks"].size());
  EXPECT_LT(c.tasks.size(), all["tasks"].size());
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("7 rank(s) of all.json are not in one.json"), std::string::npos) << c.notes[0];
  // The other way round the same tasks are compared, with the note naming the other file.
  const Comparison back = compare_reports(one, "one.json", all, "all.json");
  EXPECT_EQ(back.tasks.size(), c.tasks.size());
  ASSERT_EQ(back.notes.size(), 1u);
  EXPECT_NE(back.notes[0].find("7 rank(s) of all.json are not in one.json"), std::string::npos) << back.notes[0];
}

TEST(Compare, RejectsReportsOfDifferentLayersAndFilesThatAreNotReports) {
  const Json n2 = simulate(2, NetworkModel::kFlow, false);
  const Json n4 = simulate(4, NetworkModel::kFlow, false);
  EXPECT_EQ(error_of(n2, n4), "the reports describe different layers: config/run/num_chunks is 2 in a.json and 4 in b.json");
  Json broken = n2;
  broken.erase("stages");
  EXPECT_NE(error_of(n2, broken).find("b.json: not a moesim step report (no 'stages')"), std::string::npos);
  Json fewer = n2;
  fewer["tasks"].erase(fewer["tasks"].begin());
  EXPECT_NE(error_of(n2, fewer).find("task graphs differ: task L0.fwd.gate of rank 0 is in a.json but not in b.json"),
            std::string::npos)
      << error_of(n2, fewer);
  EXPECT_NE(error_of(fewer, n2).find("is in b.json but not in a.json"), std::string::npos);
  EXPECT_NE(error_of(Json::array(), n2).find("a.json: not a moesim step report"), std::string::npos);
}

TEST(Compare, RelativeErrorEdgeCases) {
  EXPECT_EQ((TimePair{0, 0}).relative_error(), 0.0);
  EXPECT_TRUE(std::isinf((TimePair{0, 1}).relative_error()));
  EXPECT_DOUBLE_EQ((TimePair{2, 3}).relative_error(), 0.5);
  EXPECT_DOUBLE_EQ((TimePair{4, 3}).relative_error(), -0.25);
}

}  // namespace
}  // namespace moesim::validate
