// The memory section of reports: peak, breakdown, fits / does not fit, counter tracks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/driver/simulation.h"
#include "sim/report/report.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace {

Task host_task(std::string id, TimeNs d) {
  Task t;
  t.id = std::move(id);
  t.stage = "x";
  t.work = HostWork{d};
  return t;
}

struct Fixture {
  ClusterSpec cluster = load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/nodes/dgx-a100.yaml");
  ModelSpec model = load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/moe-gpt-s-64e.yaml");
  RunSpec run;
  LayerDims dims;
  TaskGraph graph{1, {0}};

  // Weights 1 GiB resident, an activation of 2 GiB during [0, 10 us), pinned host 3 GiB.
  Fixture() {
    graph.add_buffer({"W", 0, kGiB, MemoryCategory::kModelStates, true});
    const BufferId a = graph.add_buffer({"A", 0, 2 * kGiB, MemoryCategory::kActivations, false});
    graph.add_buffer({"H", 0, 3 * kGiB, MemoryCategory::kHostPinned, true});
    Task t = host_task("t", 10000);
    t.allocates = {a};
    t.frees = {a};
    graph.add_task(t);
    graph.add_task(host_task("u", 5000));
  }

  std::pair<std::string, std::string> report() {
    const EngineRun r = simulate_graph(graph, cluster);
    const StepMetrics m = compute_step_metrics(graph, r.trace);
    const ReportInputs in{model, cluster, run, dims, graph, r.trace, m, r.memory, "test"};
    std::ostringstream summary;
    write_summary(summary, in);
    return {report_json(in), summary.str() + perfetto_trace_json(graph, r.trace, r.memory)};
  }
};

TEST(MemoryReport, PeakBreakdownAndVerdict) {
  Fixture f;
  f.model.num_layers = 1;  // the hand-made graph is the whole model
  auto [json_text, text] = f.report();
  const auto j = nlohmann::json::parse(json_text);
  const auto& mem = j["memory"];
  EXPECT_TRUE(mem["modelled"].get<bool>());
  EXPECT_EQ(mem["peak_bytes"], 3 * kGiB);
  EXPECT_EQ(mem["model_states_bytes"], kGiB);
  EXPECT_EQ(mem["activations_bytes"], 2 * kGiB);
  EXPECT_EQ(mem["temporary_bytes"], 0);
  EXPECT_EQ(mem["host_pinned_bytes"], 3 * kGiB);
  EXPECT_TRUE(mem["fits"].get<bool>());
  EXPECT_EQ(mem["live_at_peak"].size(), 2u);
  EXPECT_NE(text.find("fits in 40.000 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("device memory (MiB)"), std::string::npos);

  f.cluster.node.gpu.hbm_capacity_bytes = 2 * kGiB;
  auto [json2, text2] = f.report();
  EXPECT_FALSE(nlohmann::json::parse(json2)["memory"]["fits"].get<bool>());
  EXPECT_NE(text2.find("does not fit: needs 3.000 GiB of 2.000 GiB"), std::string::npos) << text2;
}

// A 4-layer model of which the graph is one layer: the three below hold their model states (1 GiB
// each; the graph's activation is freed by the task that allocates it, so none is kept).
TEST(MemoryReport, WholeModelVerdictCountsTheLayersNotSimulated) {
  Fixture f;
  f.model.num_layers = 4;
  f.cluster.node.gpu.hbm_capacity_bytes = 5 * kGiB;
  auto [json_text, text] = f.report();
  const auto mem = nlohmann::json::parse(json_text)["memory"];
  EXPECT_EQ(mem["peak_bytes"], 3 * kGiB);
  EXPECT_EQ(mem["whole_model"]["layers"], 4);
  EXPECT_EQ(mem["whole_model"]["simulated_layers"], 1);
  EXPECT_EQ(mem["whole_model"]["layer_model_states_bytes"], kGiB);
  EXPECT_EQ(mem["whole_model"]["layer_kept_activations_bytes"], 0);
  EXPECT_EQ(mem["whole_model"]["peak_bytes"], 6 * kGiB);
  EXPECT_FALSE(mem["fits"].get<bool>());  // 3 GiB of one layer fits in 5, the model's 6 GiB do not
  EXPECT_NE(text.find("(rank 0, at 0.000 us; 1 of 4 layers simulated)"), std::string::npos) << text;
  EXPECT_NE(text.find("whole model                  6.000 GiB  (rank 0, 4 layers: + 3 x (1.000 GiB model states + "
                      "0.000 GiB activations kept for backward)): does not fit: needs 6.000 GiB of 5.000 GiB"),
            std::string::npos)
      << text;
}

TEST(MemoryReport, GraphWithoutBuffersSaysNotModelled) {
  Fixture f;
  f.graph = TaskGraph(1, {0});
  f.graph.add_task(host_task("t", 10));
  auto [json_text, text] = f.report();
  EXPECT_FALSE(nlohmann::json::parse(json_text)["memory"]["modelled"].get<bool>());
  EXPECT_NE(text.find("not modelled"), std::string::npos);
}

}  // namespace
}  // namespace moesim
