// The cost-model registry (sim/driver/model_registry.h): one entry per network and compute model,
// found by name, its needs checked against the hardware, and every model it holds runnable on a
// bundled preset that has what the model needs.
#include "sim/driver/model_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/driver/simulation.h"
#include "sim/spec/loader.h"
#include "tests/sim/spec/spec_test_util.h"

namespace moesim {
namespace {

using testing::input_error_of;

const std::string kRoot = MOESIM_SOURCE_DIR;

ClusterSpec hardware(const std::string& path) { return load_hardware_spec(kRoot + "/hardware/" + path); }
ModelSpec gpt_s() { return load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml"); }

// Presets with and without a topology, a fabric and PipeMoE's constants.
const std::vector<std::string> kPresets{"nodes/hgx-h200.yaml", "clusters/dgx-a100-2node.yaml",
                                        "clusters/pipemoe-alpha-beta.yaml", "nodes/dgx-a100.yaml"};

RunSpec small_run(const CostModelEntry& entry) {
  RunSpec r;
  r.tokens_per_gpu = 1024;
  r.num_chunks = 2;
  if (entry.kind == CostModelKind::kNetwork) r.network = *parse_network_model(entry.name);
  if (entry.kind == CostModelKind::kCompute) r.compute = *parse_compute_model(entry.name);
  return r;
}

// The run and sweep files parse the spec's names; the flags and the listing read the registry.
TEST(ModelRegistry, HoldsTheNamesTheRunFilesParse) {
  EXPECT_EQ(cost_model_names(CostModelKind::kNetwork), network_model_names());
  EXPECT_EQ(cost_model_names(CostModelKind::kCompute), compute_model_names());
  EXPECT_EQ(cost_model_names(CostModelKind::kNetwork), (std::vector<std::string>{"auto", "alpha-beta", "flow"}));
  EXPECT_EQ(cost_model_names(CostModelKind::kCompute),
            (std::vector<std::string>{"auto", "roofline", "pipemoe-alpha-beta"}));
}

TEST(ModelRegistry, FindsEntriesByKindAndName) {
  const CostModelEntry* flow = find_cost_model(CostModelKind::kNetwork, "flow");
  ASSERT_NE(flow, nullptr);
  EXPECT_EQ(flow->name, "flow");
  EXPECT_NE(flow->make_network, nullptr);
  EXPECT_EQ(find_cost_model(CostModelKind::kCompute, "flow"), nullptr);  // names are per kind
  EXPECT_EQ(find_cost_model(CostModelKind::kNetwork, "fast"), nullptr);
  EXPECT_NE(find_cost_model(CostModelKind::kCompute, "auto"), find_cost_model(CostModelKind::kNetwork, "auto"));
}

// A chooser has no factory and picks a model of its own kind; a model has the factories of its kind.
TEST(ModelRegistry, EveryEntryIsAChooserOrAModelOfItsKind) {
  for (const CostModelEntry& e : cost_models()) {
    SCOPED_TRACE(std::string(e.name));
    EXPECT_FALSE(e.needs.empty());
    EXPECT_FALSE(e.description.empty());
    if (e.is_chooser()) {
      EXPECT_TRUE(e.make_network == nullptr && e.make_compute == nullptr);
      for (const std::string& preset : kPresets) {
        const CostModelEntry& picked = resolve_cost_model(e, hardware(preset));
        EXPECT_EQ(picked.kind, e.kind);
        EXPECT_FALSE(picked.is_chooser());
      }
    } else if (e.kind == CostModelKind::kNetwork) {
      EXPECT_TRUE(e.make_network != nullptr && e.make_compute == nullptr);
    } else {
      EXPECT_TRUE(e.make_compute != nullptr && e.isolated != nullptr && e.make_network == nullptr);
    }
  }
}

// Each model runs a step on the first preset that has what it needs, through the same path as
// `moesim simulate` (its isolated durations too, which critical-path analysis reads).
TEST(ModelRegistry, EveryModelRunsOnAPresetThatMeetsItsNeeds) {
  for (const CostModelEntry& e : cost_models()) {
    SCOPED_TRACE(std::string(e.name));
    const ClusterSpec* fit = nullptr;
    std::vector<ClusterSpec> clusters;
    for (const std::string& preset : kPresets) clusters.push_back(hardware(preset));
    for (const ClusterSpec& c : clusters)
      if (!e.unmet || !e.unmet(c)) {
        fit = &c;
        break;
      }
    ASSERT_NE(fit, nullptr) << "no preset meets the needs: " << e.needs;
    const SimulationResult r = simulate_step(gpt_s(), *fit, small_run(e));
    EXPECT_GT(r.metrics.step_ns, 0);
    const RunSpec run = small_run(e);
    const std::vector<TimeNs> alone = isolated_durations(r.graph, *fit, NetworkChoice{run.network, run.all_to_all, run.compute});
    EXPECT_EQ(alone.size(), r.graph.num_tasks());
  }
}

TEST(ModelRegistry, ChoosersFollowTheHardware) {
  const ClusterSpec two_nodes = hardware("clusters/dgx-a100-2node.yaml");
  const ClusterSpec no_topology = hardware("nodes/hgx-h200.yaml");
  const ClusterSpec pipemoe = hardware("clusters/pipemoe-alpha-beta.yaml");
  EXPECT_EQ(resolve_network_model(two_nodes, NetworkModel::kAuto), NetworkModel::kFlow);
  EXPECT_EQ(resolve_network_model(no_topology, NetworkModel::kAuto), NetworkModel::kAlphaBeta);
  EXPECT_EQ(resolve_network_model(no_topology, NetworkModel::kFlow), NetworkModel::kFlow);  // checked when built
  EXPECT_EQ(resolve_compute_model(pipemoe, ComputeModel::kAuto), ComputeModel::kPipeMoeAlphaBeta);
  EXPECT_EQ(resolve_compute_model(two_nodes, ComputeModel::kAuto), ComputeModel::kRoofline);
  EXPECT_EQ(resolve_compute_model(pipemoe, ComputeModel::kRoofline), ComputeModel::kRoofline);
}

// What a model lacks is said with the rule and the way out.
TEST(ModelRegistry, UnmetNeedsNameWhatIsMissing) {
  const CostModelEntry& flow = *find_cost_model(CostModelKind::kNetwork, "flow");
  const CostModelEntry& pipemoe = *find_cost_model(CostModelKind::kCompute, "pipemoe-alpha-beta");
  const ClusterSpec no_topology = hardware("nodes/hgx-h200.yaml");
  EXPECT_NE(input_error_of([&] { check_cost_model_needs(flow, no_topology); }).find("has no topology section"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { check_cost_model_needs(flow, loopback_cluster(no_topology, 4)); })
                .find("--network flow needs links between GPUs"),
            std::string::npos);
  const std::string rule = input_error_of([&] { check_cost_model_needs(pipemoe, no_topology); });
  EXPECT_NE(rule.find("needs the hardware's alpha_beta section"), std::string::npos) << rule;
  EXPECT_NE(rule.find("--compute auto or roofline"), std::string::npos) << rule;
  EXPECT_NO_THROW(check_cost_model_needs(pipemoe, hardware("clusters/pipemoe-alpha-beta.yaml")));

  RunSpec run;
  run.tokens_per_gpu = 1024;
  run.compute = ComputeModel::kPipeMoeAlphaBeta;
  EXPECT_NE(input_error_of([&] { simulate_step(gpt_s(), no_topology, run); }).find("alpha_beta section"), std::string::npos);
}

// The PipeMoE preset is a DGX A100 node with PipeMoE's constants: with the roofline model it is
// that node, and naming the model auto picks gives the same step as auto.
TEST(ModelRegistry, ComputeChoiceOverridesTheHardwareFile) {
  RunSpec run;
  run.tokens_per_gpu = 2048;
  run.num_chunks = 2;
  const ClusterSpec pipemoe = hardware("clusters/pipemoe-alpha-beta.yaml");
  const TimeNs by_file = simulate_step(gpt_s(), pipemoe, run).metrics.step_ns;
  run.compute = ComputeModel::kPipeMoeAlphaBeta;
  EXPECT_EQ(simulate_step(gpt_s(), pipemoe, run).metrics.step_ns, by_file);
  run.compute = ComputeModel::kRoofline;
  const TimeNs roofline = simulate_step(gpt_s(), pipemoe, run).metrics.step_ns;
  EXPECT_NE(roofline, by_file);
  run.compute = ComputeModel::kAuto;
  EXPECT_EQ(simulate_step(gpt_s(), hardware("nodes/dgx-a100.yaml"), run).metrics.step_ns, roofline);
}

}  // namespace
}  // namespace moesim
