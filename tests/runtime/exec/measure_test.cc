// measure() (`moesim run` without the command line) on the host emulation, reported by
// validate/measured_run.h: the report in the simulator's schema with the measured block, the
// reference check, and the input it rejects.
// The one-process-per-rank mode is tested under mpiexec in tests/mpi/.
#include "runtime/exec/measure.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "layer_test_util.h"
#include "runtime/exec/host_device.h"
#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/report/metrics.h"
#include "sim/report/report.h"
#include "validate/compare.h"
#include "validate/measured_run.h"

namespace moesim::runtime {
namespace {

MeasureRequest tiny_request(int ranks, bool loopback) {
  MeasureRequest req;
  req.model = testing::tiny_model();
  req.cluster = testing::adira();
  req.run.tokens_per_gpu = 48;
  req.run.num_chunks = 2;
  req.run.strategy = MemoryStrategy::kS1;
  req.ranks = ranks;
  req.loopback = loopback;
  req.iters = 3;
  req.warmup = 1;
  req.check = true;
  req.tool_version = "test";
  return req;
}

// What `moesim run` prints and writes for the request.
validate::MeasuredReport measure_and_report(const MeasureRequest& req, DeviceProvider& provider,
                                            MeasuredRun* measured = nullptr) {
  MeasuredRun run = measure(req, provider, validate::SimulatorRunGraphs{});
  EXPECT_TRUE(run.reports);
  validate::MeasuredReport report = validate::report_measured_run(req, run);
  if (measured != nullptr) *measured = std::move(run);
  return report;
}

std::string error_of(const MeasureRequest& req, DeviceProvider& provider) {
  try {
    measure(req, provider, validate::SimulatorRunGraphs{});
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(MeasureOnHost, LoopbackRanksReportTheSimulatorSchemaWithAMeasuredBlock) {
  const auto provider = make_host_provider(1);
  MeasuredRun run;
  const validate::MeasuredReport r = measure_and_report(tiny_request(2, true), *provider, &run);
  EXPECT_TRUE(run.check_passed);
  EXPECT_EQ(run.exit_code, 0);
  // The timed steps fastest first, each with every task's record.
  ASSERT_EQ(run.steps.size(), 3u);
  EXPECT_LE(run.steps.front().makespan_ns, run.steps.back().makespan_ns);
  EXPECT_EQ(run.median().trace.records.size(), static_cast<std::size_t>(run.graph->num_tasks()));
  EXPECT_NE(r.summary.find("2 rank(s) (loopback)"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("check against the CPU reference (d_model 64, d_ffn 128): passed"), std::string::npos)
      << r.summary;
  const auto j = nlohmann::json::parse(r.json);
  for (const char* key : {"config", "step_time_us", "stages", "memory", "tasks", "measured"})
    EXPECT_TRUE(j.contains(key)) << key;
  const auto& m = j["measured"];
  EXPECT_EQ(m["ranks"], 2);
  EXPECT_EQ(m["processes"], 1);
  EXPECT_EQ(m["iters"], 3);
  EXPECT_TRUE(m["check"]["passed"].get<bool>());
  EXPECT_GT(m["memory"]["arena_bytes"].get<std::int64_t>(), 0);
  EXPECT_GE(m["memory"]["arena_bytes"].get<std::int64_t>(), m["memory"]["simulated_peak_bytes"].get<std::int64_t>());
  // Both ranks' tasks, each with a measured start and end.
  int rank1 = 0;
  for (const auto& t : j["tasks"]) {
    EXPECT_GE(t["start_us"].get<double>(), 0.0) << t["id"];
    EXPECT_GE(t["end_us"].get<double>(), t["start_us"].get<double>()) << t["id"];
    rank1 += t["rank"] == 1;
  }
  EXPECT_GT(rank1, 0);
  EXPECT_NE(r.trace.find("traceEvents"), std::string::npos);
}

TEST(MeasureOnHost, SeveralLayersAreMeasuredAndCheckedLayerByLayer) {
  MeasureRequest req = tiny_request(2, true);
  req.run.num_moe_layers = 2;
  req.model.num_layers = 2;
  req.model.activation = Activation::kSwiglu;
  const auto provider = make_host_provider(1);
  MeasuredRun run;
  const validate::MeasuredReport r = measure_and_report(req, *provider, &run);
  EXPECT_TRUE(run.check_passed) << r.summary;
  EXPECT_NE(r.summary.find("2 MoE layer(s)"), std::string::npos) << r.summary;
  const auto j = nlohmann::json::parse(r.json);
  EXPECT_EQ(j["config"]["run"]["num_moe_layers"], 2);
  int layer1_tasks = 0, layer1_checks = 0;
  for (const auto& t : j["tasks"]) layer1_tasks += t["id"].get<std::string>().rfind("L1.", 0) == 0;
  for (const auto& e : j["measured"]["check"]["entries"]) layer1_checks += e["tensor"].get<std::string>().rfind("L1.", 0) == 0;
  EXPECT_GT(layer1_tasks, 0);
  EXPECT_GT(layer1_checks, 0);
  EXPECT_TRUE(j["measured"]["check"].contains("ambiguous_tokens"));
}

TEST(MeasureOnHost, TheMeasuredReportComparesWithTheSimulationOfTheSameLayer) {
  const MeasureRequest req = tiny_request(2, true);
  const auto provider = make_host_provider(1);
  const validate::MeasuredReport measured = measure_and_report(req, *provider);
  // What `moesim simulate --loopback --ep 2 --json` writes for the same layer: the two ranks on
  // one GPU of the hardware, every rank simulated.
  RunSpec run = req.run;
  run.ep_size = 2;
  const ClusterSpec loopback = loopback_cluster(req.cluster, 2);
  const LayerDims dims = derive_layer_dims(req.model, loopback, run);
  const TaskGraph graph = build_moe_graph(req.model, loopback, run, build_options_for(loopback));
  const EngineRun sim = simulate_graph(graph, loopback, NetworkChoice{run.network, run.all_to_all});
  const StepMetrics metrics = compute_step_metrics(graph, sim.trace);
  const ReportInputs in{req.model, loopback, run, dims, graph, sim.trace, metrics, sim.memory, "test", "alpha-beta"};
  const auto mj = nlohmann::json::parse(measured.json);
  const validate::Comparison c =
      validate::compare_reports(mj, "measured.json", nlohmann::json::parse(report_json(in)), "simulated.json");
  EXPECT_EQ(c.tasks.size(), mj["tasks"].size());  // every task matched
  EXPECT_TRUE(c.notes.empty()) << c.notes.front();
  EXPECT_GT(c.step.reference_us, 0.0);
  EXPECT_NE(c.reference_kind.find("measured"), std::string::npos) << c.reference_kind;
  // The prediction printed next to the measurement is that simulation: the GPU shared, the
  // device's memory the sum of both ranks' peaks.
  EXPECT_DOUBLE_EQ(mj["measured"]["simulated_step_time_us"].get<double>(), ns_to_us(metrics.step_ns));
  EXPECT_TRUE(mj["config"]["hardware"]["node"]["loopback"].get<bool>());
  EXPECT_EQ(mj["measured"]["memory"]["simulated_device_peak_bytes"].get<std::int64_t>(),
            device_peak_bytes(loopback, sim.memory));
  // Two ranks with the same buffers (uniform routing): twice rank 0's arena and workspace, plus
  // the device's library workspace once.
  const auto& mem = mj["measured"]["memory"];
  EXPECT_EQ(mem["loopback_device_bytes"].get<std::int64_t>(),
            2 * (mem["arena_bytes"].get<std::int64_t>() + mem["executor_workspace_bytes"].get<std::int64_t>()) +
                mem["library_workspace_bytes"].get<std::int64_t>());
  EXPECT_NE(measured.summary.find("device memory of the 2 virtual ranks"), std::string::npos) << measured.summary;
}

TEST(MeasureOnHost, RejectsWhatItCannotRunBeforeTouchingADevice) {
  const auto one = make_host_provider(1);
  MeasureRequest on_loopback_node = tiny_request(2, false);
  on_loopback_node.cluster = loopback_cluster(on_loopback_node.cluster, 2);
  EXPECT_NE(error_of(on_loopback_node, *one).find("is a loopback node"), std::string::npos);
  EXPECT_NE(error_of(tiny_request(2, false), *one).find("--ranks 2 needs 2 devices, this process sees 1"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_request(0, true), *one).find("--ranks must be at least 1"), std::string::npos);
  MeasureRequest no_iters = tiny_request(1, false);
  no_iters.iters = 0;
  EXPECT_NE(error_of(no_iters, *one).find("--iters must be at least 1"), std::string::npos);
  MeasureRequest uneven = tiny_request(3, true);  // 8 experts over 3 ranks
  EXPECT_NE(error_of(uneven, *one), "");
  const auto none = make_host_provider(0);
  EXPECT_NE(error_of(tiny_request(1, false), *none).find("needs a GPU, and none is usable: the host provider has no devices"),
            std::string::npos);
}

TEST(MeasureOnHost, ProcessesGivenTheSameGpuAreNamed) {
  EXPECT_EQ(processes_sharing_a_device({"a: GPU 0000:01:00.0", "a: GPU 0000:02:00.0", "b: GPU 0000:01:00.0"}), "");
  const std::string e = processes_sharing_a_device(
      {"a: GPU 0000:01:00.0", "a: GPU 0000:02:00.0", "a: GPU 0000:01:00.0", "a: GPU 0000:01:00.0"});
  EXPECT_NE(e.find("processes 0, 2 and 3 were given the same device (a: GPU 0000:01:00.0)"), std::string::npos) << e;
  EXPECT_EQ(e.find("processes 1"), std::string::npos) << e;
  EXPECT_EQ(processes_configured_differently({7, 7, 7}), "");
  const std::string d = processes_configured_differently({7, 7, 8, 9});
  EXPECT_NE(d.find("processes 2, 3 were started with a configuration that differs from process 0's"),
            std::string::npos)
      << d;
  EXPECT_NE(processes_configured_differently({7, 8}).find("process 1 was started"), std::string::npos);
  // Host emulation: every process has its own devices.
  const auto provider = make_host_provider(1);
  EXPECT_NE(provider->identity(0), "");
}

TEST(MeasureOnHost, AgreeOnInputWithoutAGroupIsThisProcessAlone) {
  EXPECT_TRUE(agree_on_input(nullptr, ""));
  EXPECT_THROW(agree_on_input(nullptr, "bad"), InputError);
}

}  // namespace
}  // namespace moesim::runtime
