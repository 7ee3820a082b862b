// The one-process-per-rank mode of `moesim run` (mpirun -np N), on the host emulation: each MPI
// process is one expert-parallel rank with its own HostDevice, the all-to-alls go through MPI
// (HostProcessTransport), and measure() merges the traces and gathers the tensors at rank 0.
// The NCCL transport follows the same path with ncclCommInitRank in place of the MPI exchange.
//
// Started by CTest under mpiexec (tests/CMakeLists.txt); run alone it exits 77 (skipped).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../runtime/exec/layer_test_util.h"
#include "runtime/comm/host_process_transport.h"
#include "runtime/comm/loopback.h"
#include "runtime/comm/process_group.h"
#include "runtime/exec/host_device.h"
#include "runtime/exec/layer_executor.h"
#include "runtime/exec/measure.h"
#include "runtime/exec/rank_values_io.h"
#include "runtime/exec/reference_check.h"
#include "sim/core/error.h"
#include "sim/build/moe_graph.h"
#include "validate/measured_run.h"

namespace moesim::runtime {
namespace {

ProcessGroup* g_world = nullptr;

using testing::adira;
using testing::same_results;
using testing::tiny_model;

RunSpec tiny_run(int ranks, int chunks, MemoryStrategy strategy) {
  RunSpec run;
  run.tokens_per_gpu = 48;
  run.ep_size = ranks;
  run.num_chunks = chunks;
  run.strategy = strategy;
  return run;
}

TaskGraph full_graph(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) {
  BuildOptions options;
  options.representative_rank = false;
  return build_moe_graph(model, cluster, run, options);
}

TEST(RuntimeMpi, OneRankPerProcessEqualsLoopbackRanksAndTheReference) {
  const int size = g_world->size();
  const ModelSpec model = tiny_model();
  const ClusterSpec cluster = adira();
  for (MemoryStrategy strategy : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS3, MemoryStrategy::kS4})
    for (int chunks : {1, 2}) {
      const std::string label = std::string(to_string(strategy)) + " n=" + std::to_string(chunks);
      const RunSpec run = tiny_run(size, chunks, strategy);
      const TaskGraph graph = full_graph(model, cluster, run);
      const LayerDims dims = derive_layer_dims(model, cluster, run);
      HostDevice device;
      const auto transport = make_host_process_transport(device, *g_world);
      LayerExecutor exec(graph, model, dims, {ExecutorRank{g_world->rank(), &device}}, *transport, ExecutorOptions{});
      exec.initialize();
      exec.run_step();
      exec.run_step();
      const auto parts = g_world->gather(pack_rank_values(exec.download(g_world->rank())), 0);
      if (g_world->rank() != 0) continue;
      std::vector<RankValues> got;
      for (const auto& p : parts) got.push_back(unpack_rank_values(p));
      for (const CheckEntry& e : check_against_reference(got, model, dims).entries)
        EXPECT_TRUE(e.ok()) << label << ": " << e.tensor << " " << e.relative << " > " << e.tolerance;
      // The same ranks in one process over the loopback transport: the same bits.
      HostDevice one;
      LoopbackTransport loopback(one, size);
      std::vector<ExecutorRank> local;
      for (int r = 0; r < size; ++r) local.push_back(ExecutorRank{r, &one});
      LayerExecutor single(graph, model, dims, local, loopback, ExecutorOptions{});
      single.initialize();
      single.run_step();
      for (int r = 0; r < size; ++r) {
        const RankValues one_process = single.download(r);
        EXPECT_TRUE(same_results(got[static_cast<std::size_t>(r)], one_process)) << label << " rank " << r;
        EXPECT_EQ(got[static_cast<std::size_t>(r)].topk_row, one_process.topk_row) << label << " rank " << r;
      }
    }
}

MeasureRequest tiny_request() {
  MeasureRequest req;
  req.model = tiny_model();
  req.cluster = adira();
  req.run = tiny_run(1, 2, MemoryStrategy::kS2);
  req.ranks = 1;  // one rank per process: the group's size
  req.iters = 3;
  req.warmup = 1;
  req.check = true;
  req.tool_version = "test";
  req.processes = g_world;
  return req;
}

TEST(RuntimeMpi, MeasureMergesEveryRanksTraceAndChecksAtRankZero) {
  const auto provider = make_host_provider(1);
  const MeasureRequest req = tiny_request();
  const MeasuredRun run = measure(req, *provider, validate::SimulatorRunGraphs{});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_TRUE(run.check_passed);
  EXPECT_EQ(run.reports, g_world->rank() == 0);
  if (g_world->rank() != 0) {
    EXPECT_TRUE(run.steps.empty() && !run.check);
    return;
  }
  const validate::MeasuredReport r = validate::report_measured_run(req, run);
  EXPECT_NE(r.summary.find(std::to_string(g_world->size()) + " rank(s) (one process each)"), std::string::npos)
      << r.summary;
  const auto j = nlohmann::json::parse(r.json);
  EXPECT_EQ(j["measured"]["ranks"], g_world->size());
  EXPECT_EQ(j["measured"]["processes"], g_world->size());
  EXPECT_EQ(j["measured"]["transport"], "host processes (MPI)");
  EXPECT_TRUE(j["measured"]["check"]["passed"].get<bool>());
  std::vector<int> tasks_per_rank(static_cast<std::size_t>(g_world->size()), 0);
  for (const auto& t : j["tasks"]) {
    EXPECT_GE(t["start_us"].get<double>(), 0.0) << t["id"] << " rank " << t["rank"];
    ++tasks_per_rank.at(t["rank"].get<std::size_t>());
  }
  for (int n : tasks_per_rank) EXPECT_EQ(n, tasks_per_rank[0]);  // every rank's tasks came to rank 0
  EXPECT_GT(tasks_per_rank[0], 0);
}

TEST(RuntimeMpi, InputErrorsAreReportedOnceByRankZero) {
  const auto provider = make_host_provider(1);
  MeasureRequest req = tiny_request();
  req.loopback = true;
  if (g_world->rank() == 0) {
    try {
      measure(req, *provider, validate::SimulatorRunGraphs{});
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--loopback runs every rank in one process"), std::string::npos) << e.what();
    }
  } else {
    const MeasuredRun r = measure(req, *provider, validate::SimulatorRunGraphs{});
    EXPECT_EQ(r.exit_code, 0);  // quiet: the reporter exits 2
    EXPECT_FALSE(r.reports);
  }
  req.loopback = false;
  req.ranks = g_world->size() + 1;
  if (g_world->rank() == 0)
    EXPECT_THROW(measure(req, *provider, validate::SimulatorRunGraphs{}), InputError);
  else
    EXPECT_EQ(measure(req, *provider, validate::SimulatorRunGraphs{}).exit_code, 0);
}

// measure() on every process: `reporter` throws the InputError that contains `expected`, every
// other process returns exit code 0 without reporting (the job exits with the reporter's 2).
void expect_reported_once(const MeasureRequest& req, DeviceProvider& provider, int reporter,
                          const std::string& expected) {
  if (g_world->rank() == reporter) {
    try {
      measure(req, provider, validate::SimulatorRunGraphs{});
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  } else {
    const MeasuredRun r = measure(req, provider, validate::SimulatorRunGraphs{});
    EXPECT_EQ(r.exit_code, 0);  // quiet: the reporter exits 2
    EXPECT_FALSE(r.reports);
  }
}

TEST(RuntimeMpi, MoreProcessesOnAHostThanDevicesIsAnInputErrorNamingTheProcess) {
  const int size = g_world->size();
  if (size < 3) GTEST_SKIP() << "needs 3 or more processes (one device would be shared by design)";
  const auto provider = make_host_provider(size - 1);  // every process on one host: the last has none
  const std::string last = std::to_string(size - 1);
  expect_reported_once(tiny_request(), *provider, size - 1,
                       "process " + last + ": process " + last + " is number " + last +
                           " on its host, which shows it only " + last + " GPUs");
}

// NCCL would hang or exchange wrong sizes if the processes disagreed: rank 0 names the ones whose
// resolved configuration differs from its own, before any device work.
TEST(RuntimeMpi, AProcessStartedWithAnotherConfigurationIsNamed) {
  const auto provider = make_host_provider(1);
  MeasureRequest req = tiny_request();
  const int last = g_world->size() - 1;
  if (g_world->rank() == last) req.run.seed += 1;
  expect_reported_once(req, *provider, 0,
                       "process " + std::to_string(last) + " was started with a configuration that differs from "
                                                           "process 0's");
}

TEST(RuntimeMpi, AFailureOnAnotherHostNamesItsProcess) {
  const int last = g_world->size() - 1;
  const std::string error = g_world->rank() == last ? "no GPU here" : "";
  if (g_world->rank() == last) {
    try {
      agree_on_input(g_world, error);
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), "process " + std::to_string(last) + ": no GPU here");
    }
  } else {
    EXPECT_FALSE(agree_on_input(g_world, error));
  }
  EXPECT_TRUE(agree_on_input(g_world, ""));
}

}  // namespace
}  // namespace moesim::runtime

int main(int argc, char** argv) {
  // This test program is not built beside the MPI plugin, which it is given instead.
  std::unique_ptr<moesim::runtime::ProcessGroup> world =
      moesim::runtime::launched_process_group({std::filesystem::path(MOESIM_MPI_PLUGIN)});
  if (world == nullptr || world->size() < 2) {
    std::printf("not started by an MPI launcher with 2 or more processes; skipping (CTest runs it under mpiexec)\n");
    return 77;
  }
  moesim::runtime::g_world = world.get();
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const bool all_passed = world->all_true(rc == 0);
  return all_passed ? 0 : 1;
}
