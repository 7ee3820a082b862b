// The memory estimate made before a simulation allocates anything (sim/driver/footprint.h): the
// graph's task count bounds the built graph's from above, within 1.5x, on every golden scenario
// (each policy, strategy, checkpointing, TED layout, routing and network); the routing bytes
// follow the plan's N x E and n x N x N counts; the limit names the flag, the estimate and --jobs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "sim/core/error.h"
#include "sim/driver/footprint.h"
#include "sim/driver/simulation.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace {

namespace fs = std::filesystem;

TEST(Footprint, TaskEstimateBoundsEveryGoldenScenarioWithinOneAndAHalf) {
  const fs::path golden = fs::path(MOESIM_SOURCE_DIR) / "tests" / "golden";
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(golden)) {
    const fs::path file = entry.path() / "scenario.yaml";
    if (!fs::exists(file)) continue;
    const RunFile rf = load_run_spec(file.string());
    ASSERT_TRUE(rf.model_path && rf.hardware_path) << file;
    const ModelSpec model = load_model_spec(*rf.model_path);
    const ClusterSpec cluster = load_hardware_spec(*rf.hardware_path);
    const BuildOptions options = build_options_for(cluster, rf.run);
    const LayerDims dims = derive_layer_dims(model, cluster, rf.run);
    const Footprint f = estimate_footprint(dims, rf.run, options);
    const TaskGraph graph = build_moe_graph(model, cluster, rf.run, options);
    const auto built = static_cast<std::int64_t>(graph.num_tasks());
    EXPECT_GE(f.graph.tasks, built) << file;
    EXPECT_LE(f.graph.tasks, built + built / 2) << file;
    EXPECT_EQ(f.graph.simulated_ranks, static_cast<std::int64_t>(graph.simulated_ranks().size())) << file;
    EXPECT_EQ(f.graph.world, graph.world_size()) << file;
    EXPECT_EQ(f.graph_bytes, f.graph.tasks * kBytesPerTask) << file;
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

TEST(Footprint, RoutingBytesCountTheDemandAndThePairsOfEveryChunk) {
  LayerDims dims;
  dims.ep_size = 64;
  dims.num_experts = 256;
  dims.num_chunks = 4;
  dims.tp_size = 1;
  dims.dp_size = 1;
  RunSpec run;
  run.num_chunks = 4;
  EXPECT_EQ(estimate_footprint(dims, run, {}).routing_bytes, 0);  // uniform: no routing plan
  run.routing = parse_routing_spec("zipf:1.2", SourceLocation{});
  const Footprint zipf = estimate_footprint(dims, run, {});
  EXPECT_EQ(zipf.routing_bytes, 8 * (64 * 256 + 4 * 64 * 64));
  EXPECT_EQ(zipf.graph.simulated_ranks, 64);  // imbalanced routing simulates every rank
  EXPECT_EQ(zipf.total_bytes(), zipf.routing_bytes + zipf.graph_bytes);
  run.routing.kind = RoutingKind::kMatrix;  // the file's popularities are held while it is read
  EXPECT_EQ(estimate_footprint(dims, run, {}).routing_bytes, zipf.routing_bytes + 8 * 64 * 256);
}

TEST(Footprint, TheLimitNamesTheFlagTheEstimateAndTheJobs) {
  Footprint f;
  f.graph.tasks = 1000;
  f.graph.simulated_ranks = 8;
  f.graph_bytes = 1000 * kBytesPerTask;
  EXPECT_NO_THROW(check_memory_limit(f, 1, f.total_bytes(), "the simulation"));
  EXPECT_NO_THROW(check_memory_limit(f, 64, 0, "the simulation"));  // 0: no limit
  try {
    check_memory_limit(f, 2, f.total_bytes(), "the plan");
    ADD_FAILURE() << "two simulations at once exceed a limit of one";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the plan would need about"), std::string::npos) << m;
    EXPECT_NE(m.find("1000 tasks on 8 simulated rank(s)"), std::string::npos) << m;
    EXPECT_NE(m.find("x 2 simulations at once (--jobs)"), std::string::npos) << m;
    EXPECT_NE(m.find("--memory-limit"), std::string::npos) << m;
  }
  EXPECT_GT(default_memory_limit(), 0);
}

}  // namespace
}  // namespace moesim
