// Loopback nodes: virtual ranks sharing one GPU, as `moesim run --ranks N --loopback` runs them.
// What they share (compute, the PCIe link per direction, the GPU's memory for all-to-alls), the
// device-copy formulas, the device's memory total, the loader's rules, and that the preset equals
// the derived cluster.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/net/alpha_beta.h"
#include "sim/report/report.h"
#include "sim/spec/loader.h"
#include "../spec/spec_test_util.h"
#include "../task_builders.h"

namespace moesim {
namespace {

using testing::input_error_of;
using testing::TempFiles;
using testing::host_task;
using testing::copy_task;

const std::string kRoot = MOESIM_SOURCE_DIR;

// A GPU with round numbers: HBM 1e12 B/s at efficiency 1 (1000 B/ns), launch 1000 ns, PCIe
// 1e10 B/s (10 B/ns) without latency each way.
ClusterSpec test_loopback(int ranks) {
  ClusterSpec base;
  base.name = "base";
  base.node.gpu.name = "TestGPU";
  base.node.gpu.peak_flops = {{DType::kFp32, 1e12}};
  base.node.gpu.hbm_bandwidth = 1e12;
  base.node.gpu.hbm_efficiency = 1.0;
  base.node.gpu.hbm_capacity_bytes = 1LL << 30;
  base.node.gpu.kernel_launch_ns = 1000;
  base.node.gpu.sm_count = 108;
  base.node.pcie_d2h = {1e10, 1.0, 0};
  base.node.pcie_h2d = {1e10, 1.0, 0};
  return loopback_cluster(base, ranks);
}

TEST(Loopback, DerivedClusterIsOneGpuWithEveryRankOnIt) {
  const ClusterSpec c = test_loopback(4);
  EXPECT_TRUE(c.node.loopback);
  EXPECT_EQ(c.num_gpus(), 4);
  EXPECT_EQ(c.ranks_per_device(), 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(c.device_of(r), 0);
  EXPECT_EQ(c.node.gpu.name, "TestGPU");
  EXPECT_NE(input_error_of([] { test_loopback(0); }).find("1 to 1024 virtual ranks, got 0"), std::string::npos);
}

// Two kernels of 1000 and 3000 ns on two virtual ranks: each runs at 1/2 while both run (the
// first ends at 2000 having done 1000), then the second alone: 2000 more. The device did
// 4000 ns of work in 4000 ns. On two real GPUs they take their own times.
TEST(Loopback, VirtualRanksShareTheComputeOfTheirGpu) {
  TaskGraph g(2, {0, 1});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 1000));
  const auto b = g.add_task(host_task("b", 1, StreamClass::kCompute, 3000));
  const Trace shared = simulate_graph(g, test_loopback(2)).trace;
  EXPECT_EQ(shared.records[a].end_ns, 2000);
  EXPECT_EQ(shared.records[b].end_ns, 4000);

  ClusterSpec two_gpus = test_loopback(2);
  two_gpus.node.loopback = false;
  two_gpus.node.intra_node = {1e10, 1.0, 0};
  const Trace separate = simulate_graph(g, two_gpus).trace;
  EXPECT_EQ(separate.records[a].end_ns, 1000);
  EXPECT_EQ(separate.records[b].end_ns, 3000);
}

// 10,000 B at 10 B/ns = 1000 ns alone. Two device-to-host copies use the GPU's one copy engine
// of that direction one after the other (pcie.copy_engines = 1); with two engines they share the
// link's direction. A device-to-host and a host-to-device copy do not meet (memcpy with memcpy:
// factor 1.0; separate engines, full-duplex link). The copy that waited for the engine starts,
// in the trace, when it gets it, as a copy engine's stream times it (eight virtual ranks'
// offloads on an H200 each measured at their own copy time, back to back: validate/results/
// h200-2026-11-27); it is ready from the start.
TEST(Loopback, CopiesInOneDirectionQueueForAnEngineOrShareTheLink) {
  TaskGraph same(2, {0, 1});
  const auto a = same.add_task(copy_task("a", 0, CopyDirection::kDeviceToHost, 10000));
  const auto b = same.add_task(copy_task("b", 1, CopyDirection::kDeviceToHost, 10000));
  const Trace t = simulate_graph(same, test_loopback(2)).trace;
  EXPECT_EQ(t.records[a].start_ns, 0);
  EXPECT_EQ(t.records[a].end_ns, 1000);
  EXPECT_EQ(t.records[b].ready_ns, 0);
  EXPECT_EQ(t.records[b].start_ns, 1000);
  EXPECT_EQ(t.records[b].end_ns, 2000);
  ClusterSpec two_engines = test_loopback(2);
  two_engines.node.copy_engines = 2;
  const Trace s = simulate_graph(same, two_engines).trace;
  EXPECT_EQ(s.records[a].end_ns, 2000);
  EXPECT_EQ(s.records[b].start_ns, 0);
  EXPECT_EQ(s.records[b].end_ns, 2000);

  TaskGraph opposite(2, {0, 1});
  const auto c = opposite.add_task(copy_task("c", 0, CopyDirection::kDeviceToHost, 10000));
  const auto d = opposite.add_task(copy_task("d", 1, CopyDirection::kHostToDevice, 10000));
  const Trace u = simulate_graph(opposite, test_loopback(2)).trace;
  EXPECT_EQ(u.records[c].end_ns, 1000);
  EXPECT_EQ(u.records[d].end_ns, 1000);
}

// All-to-all of b = 1e6 B per peer over 4 virtual ranks: 16 blocks (own ones included) copied,
// 4 copies per receiver: 4 * 1000 + 2 * 16e6 / 1000 = 4000 + 32000 = 36000 ns (> 16 launches). A group of one
// keeps the device-copy formula: 1000 + 2e6 / 1000 = 3000. Ring all-reduce of 1e6 B per peer
// over 4: 6 steps, 6 * 1000 + 2 * 6 * 4e6 / 1000 = 6000 + 48000 = 54000.
TEST(Loopback, CollectivesAreDeviceCopiesThroughTheGpusMemory) {
  const ClusterSpec c = test_loopback(4);
  const TaskGraph g(4, {0, 1, 2, 3});
  const AlphaBetaNetwork net(g, c);
  EXPECT_EQ(net.isolated_duration(CollectiveWork{CollectiveOp::kAllToAll, 0, 1000000}, {0, 1, 2, 3}), 36000);
  EXPECT_EQ(net.isolated_duration(CollectiveWork{CollectiveOp::kAllToAll, 0, 1000000}, {2}), 3000);
  EXPECT_EQ(net.isolated_duration(CollectiveWork{CollectiveOp::kAllReduce, 0, 1000000}, {0, 1, 2, 3}), 54000);
  // 1,000 B per peer: the 16 copies take 4 * 1000 + 32 = 4032 ns on the GPU, but one host thread
  // issues them one launch apart: 16 * 1000 = 16000.
  EXPECT_EQ(net.isolated_duration(CollectiveWork{CollectiveOp::kAllToAll, 0, 1000}, {0, 1, 2, 3}), 16000);
}

// Dispatch and combine all-to-alls at once (36000 ns each alone): they share the GPU's memory and
// both end at 72000 (communication with communication: factor 1.0).
TEST(Loopback, ConcurrentCollectivesShareTheGpusMemory) {
  TaskGraph g(4, {0, 1, 2, 3});
  const GroupId all = g.add_group({0, 1, 2, 3});
  const auto d = g.add_task(testing::all_to_all_task("dispatch", all, 1000000, StreamClass::kCommDispatch));
  const auto c = g.add_task(testing::all_to_all_task("combine", all, 1000000, StreamClass::kCommCombine));
  const Trace t = simulate_graph(g, test_loopback(4)).trace;
  EXPECT_EQ(t.records[d].end_ns, 72000);
  EXPECT_EQ(t.records[c].end_ns, 72000);
}

// Work added partway through another's run: with interference switched off (every factor 1),
// kernel A (3000 ns) runs alone until rank 1's host-to-device copy (1000 ns) ends, then shares the
// GPU with kernel B (1000 ns): both at 1/2, B ends at 3000, A has 1000 left and ends at 4000.
// Collectives alike: dispatch (36000 ns alone) runs alone until 12000, then with combine at 1/2
// each: dispatch ends at 60000, combine, 12000 short, at 72000.
TEST(Loopback, WorkStartingMidwaySlowsWhatRuns) {
  ClusterSpec c = test_loopback(4);
  for (auto& row : c.node.interference.factors) row.fill(1.0);
  TaskGraph g(4, {0, 1, 2, 3});
  const auto a = g.add_task(host_task("a", 0, StreamClass::kCompute, 3000));
  const auto h2d = g.add_task(copy_task("h2d", 1, CopyDirection::kHostToDevice, 10000));
  const auto b = g.add_task(host_task("b", 1, StreamClass::kCompute, 1000));
  g.add_dependency(h2d, b);
  const Trace t = simulate_graph(g, c).trace;
  EXPECT_EQ(t.records[b].start_ns, 1000);
  EXPECT_EQ(t.records[b].end_ns, 3000);
  EXPECT_EQ(t.records[a].end_ns, 4000);

  TaskGraph h(4, {0, 1, 2, 3});
  const GroupId group = h.add_group({0, 1, 2, 3});
  const auto wait = h.add_task(host_task("wait", 2, StreamClass::kCopyD2H, 12000));
  const auto dispatch = h.add_task(testing::all_to_all_task("dispatch", group, 1000000, StreamClass::kCommDispatch));
  const auto combine = h.add_task(testing::all_to_all_task("combine", group, 1000000, StreamClass::kCommCombine));
  h.add_dependency(wait, combine);
  const Trace u = simulate_graph(h, c).trace;
  EXPECT_EQ(u.records[combine].start_ns, 12000);
  EXPECT_EQ(u.records[dispatch].end_ns, 60000);
  EXPECT_EQ(u.records[combine].end_ns, 72000);
}

// A memory-bound kernel of 2e7 B (1000 + 2e7 / 1000 = 21000 ns) holds the SMs; a device-copy
// all-to-all released at 500 by a host-to-device copy (5,000 B at 10 B/ns) queues behind it
// (sim/engine/kernel_queue.h): issued at 500, it copies after the kernel, in its own time
// (interference off): over two virtual ranks its 4 copies' launches, 4000 ns (> 2 * 1000 + 2 *
// 4e4 / 1000); a group of one on a GPU of its own, 1000 + 2 * 1e4 / 1000 = 1020 ns. NCCL's
// all-to-all between two GPUs queues too (its kernel on GPU 0 arrived after the one running
// there): it runs in its own time after the kernel.
TEST(Loopback, DeviceCopyCollectivesQueueBehindRunningKernels) {
  ClusterSpec loopback = test_loopback(2);
  for (auto& row : loopback.node.interference.factors) row.fill(1.0);
  ClusterSpec two_gpus = loopback;
  two_gpus.node.loopback = false;
  two_gpus.node.intra_node = {1e10, 1.0, 0};
  auto graph = [](bool one_rank_group) {
    TaskGraph g(2, {0, 1});
    const GroupId group = one_rank_group ? g.add_group({0}) : g.add_group({0, 1});
    Task kernel;
    kernel.id = "kernel";
    kernel.rank = 0;
    kernel.stream = StreamClass::kCompute;
    kernel.work = ElementwiseWork{10000000, 10000000, 0};
    g.add_task(kernel);
    const auto h2d = g.add_task(copy_task("h2d", 0, CopyDirection::kHostToDevice, 5000));
    const auto a2a = g.add_task(testing::all_to_all_task("a2a", group, 10000, StreamClass::kCommDispatch));
    g.add_dependency(h2d, a2a);
    return g;
  };
  for (const auto& [cluster, one_rank_group] :
       {std::pair{loopback, false}, std::pair{two_gpus, true}}) {
    const Trace t = simulate_graph(graph(one_rank_group), cluster).trace;
    EXPECT_EQ(t.records[0].end_ns, 21000);
    EXPECT_EQ(t.records[2].start_ns, 500);
    EXPECT_EQ(t.records[2].end_ns, 21000 + (one_rank_group ? 1020 : 4000));
  }
  const TaskGraph between_gpus = graph(false);
  const Trace nccl = simulate_graph(between_gpus, two_gpus).trace;
  EXPECT_EQ(nccl.records[2].start_ns, 500);
  const TimeNs alone = isolated_durations(between_gpus, two_gpus, NetworkChoice{})[2];
  EXPECT_GT(alone, 0);
  EXPECT_EQ(nccl.records[2].end_ns, 21000 + alone);
}

TEST(Loopback, NeedsEveryRankAndTheAlphaBetaModel) {
  const TaskGraph one_of_two(2, {0});
  EXPECT_NE(input_error_of([&] { simulate_graph(one_of_two, test_loopback(2)); }).find("every rank must be simulated"),
            std::string::npos);
  const TaskGraph g(2, {0, 1});
  EXPECT_NE(input_error_of([&] { simulate_graph(g, test_loopback(2), NetworkChoice{NetworkModel::kFlow}); })
                .find("share one GPU"),
            std::string::npos);
  const TaskGraph three(3, {0, 1, 2});
  EXPECT_NE(input_error_of([&] { simulate_graph(three, test_loopback(2)); }).find("the job has 3 ranks"),
            std::string::npos);
}

struct Step {
  SimulationResult result;
  std::vector<TimeNs> isolated;
};

Step simulate_layer(const ClusterSpec& cluster, int ep, int chunks, MemoryStrategy strategy = MemoryStrategy::kNone) {
  const ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  RunSpec run;
  run.tokens_per_gpu = 1024;
  run.num_chunks = chunks;
  run.ep_size = ep;
  run.strategy = strategy;
  BuildOptions options;
  options.representative_rank = false;
  SimulationResult r = simulate_step(model, cluster, run, options);
  std::vector<TimeNs> isolated = isolated_durations(r.graph, cluster);
  return Step{std::move(r), std::move(isolated)};
}

// A whole MoE layer on 4 virtual ranks of one H100: the GPU does every rank's kernels, so the step
// is at least the sum of all ranks' compute-stream work, and slower than on 4 H100s; dependencies
// and in-order streams hold as everywhere.
TEST(Loopback, AStepIsBoundedByTheOneGpusThroughput) {
  const ClusterSpec node = load_hardware_spec(kRoot + "/hardware/nodes/hgx-h100.yaml");
  for (MemoryStrategy s : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS4}) {
    const Step loop = simulate_layer(loopback_cluster(node, 4), 4, 2, s);
    const TaskGraph& g = loop.result.graph;
    const Trace& t = loop.result.trace;
    ASSERT_EQ(g.simulated_ranks().size(), 4u);
    TimeNs compute = 0;
    TimeNs sum = 0;
    for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
      if (g.task(i).stream == StreamClass::kCompute) compute += loop.isolated[i];
      sum += t.records[i].end_ns - t.records[i].start_ns;
    }
    for (const auto& [from, to, kind] : g.edges()) ASSERT_LE(t.records[from].end_ns, t.records[to].start_ns);
    const TimeNs step = t.makespan_ns();
    EXPECT_GE(step, compute) << to_string(s);
    EXPECT_LE(step, sum) << to_string(s);
    const Step real = simulate_layer(node, 4, 2, s);
    EXPECT_GT(step, real.result.trace.makespan_ns()) << to_string(s);
  }
}

// One virtual rank is one GPU: the same step as the node simulated with EP = 1.
TEST(Loopback, OneVirtualRankIsTheGpuAlone) {
  const ClusterSpec node = load_hardware_spec(kRoot + "/hardware/nodes/hgx-h100.yaml");
  const Step loop = simulate_layer(loopback_cluster(node, 1), 1, 4);
  ClusterSpec one = node;
  one.node.gpus_per_node = 1;
  one.node.topology = NodeTopology{};  // its 8-GPU topology would not describe one GPU
  const Step alone = simulate_layer(one, 1, 4);
  EXPECT_EQ(loop.result.trace.makespan_ns(), alone.result.trace.makespan_ns());
}

TEST(Loopback, PresetEqualsTheDerivedCluster) {
  const ClusterSpec preset = load_hardware_spec(kRoot + "/hardware/nodes/h100-loopback-8.yaml");
  EXPECT_TRUE(preset.node.loopback);
  EXPECT_EQ(preset.num_gpus(), 8);
  EXPECT_EQ(preset.ranks_per_device(), 8);
  const ClusterSpec derived = loopback_cluster(load_hardware_spec(kRoot + "/hardware/nodes/hgx-h100.yaml"), 8);
  EXPECT_EQ(simulate_layer(preset, 8, 2).result.trace.makespan_ns(),
            simulate_layer(derived, 8, 2).result.trace.makespan_ns());
}

// Each virtual rank's buffers are planned on their own; the GPU holds the sum of the peaks, and
// that sum decides whether the step fits.
TEST(Loopback, TheGpuHoldsEveryVirtualRanksPeak) {
  ClusterSpec c = loopback_cluster(load_hardware_spec(kRoot + "/hardware/nodes/hgx-h100.yaml"), 4);
  const Step s = simulate_layer(c, 4, 2);
  std::int64_t sum = 0, worst = 0;
  for (const RankMemory& m : s.result.memory) {
    sum += m.peak_device_bytes;
    worst = std::max(worst, m.peak_device_bytes);
  }
  ASSERT_GT(worst, 0);
  EXPECT_EQ(device_peak_bytes(c, s.result.memory), sum);
  ClusterSpec separate = c;
  separate.node.loopback = false;
  EXPECT_EQ(device_peak_bytes(separate, s.result.memory), worst);

  c.node.gpu.hbm_capacity_bytes = (worst + sum) / 2;  // one rank fits, four do not
  const ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  const SimulationResult& r = s.result;
  RunSpec run;
  run.tokens_per_gpu = 1024;
  run.num_chunks = 2;
  run.ep_size = 4;
  const ReportInputs in{model, c, run, r.dims, r.graph, r.trace, r.metrics, r.memory, "test"};
  const auto j = nlohmann::json::parse(report_json(in));
  EXPECT_EQ(j["memory"]["virtual_ranks"], 4);
  EXPECT_EQ(j["memory"]["device_peak_bytes"], sum);
  EXPECT_FALSE(j["memory"]["fits"].get<bool>());
  EXPECT_TRUE(j["config"]["hardware"]["node"]["loopback"].get<bool>());
  std::ostringstream summary;
  write_summary(summary, in);
  EXPECT_NE(summary.str().find("4 virtual ranks on one H100"), std::string::npos) << summary.str();
  EXPECT_NE(summary.str().find("does not fit"), std::string::npos) << summary.str();
}

// The loader's rules, each naming the file and line of the key.
TEST(Loopback, LoaderRules) {
  TempFiles tmp;
  const std::string gpu = "gpu: " + kRoot + "/hardware/gpus/h100-sxm5.yaml\n";
  const std::string head = "schema_version: 1\nkind: node\nname: lb\n" + gpu +
                           "gpus_per_node: 4\npcie: {h2d_bandwidth: 50 GB/s, d2h_bandwidth: 50 GB/s, latency: 10 us}\n";
  const ClusterSpec ok = load_hardware_spec(tmp.write("ok.yaml", head + "loopback: true\n"));
  EXPECT_TRUE(ok.node.loopback);  // no intra_node needed
  EXPECT_EQ(ok.ranks_per_device(), 4);

  const std::string intra = tmp.write("intra.yaml", head + "loopback: true\nintra_node: {bandwidth: 450 GB/s, latency: 3 us}\n");
  const std::string e1 = input_error_of([&] { load_hardware_spec(intra); });
  EXPECT_NE(e1.find("intra.yaml:8"), std::string::npos) << e1;
  EXPECT_NE(e1.find("intra_node does not apply to a loopback node"), std::string::npos) << e1;

  const std::string not_bool = tmp.write("notbool.yaml", head + "loopback: 8\n");
  EXPECT_NE(input_error_of([&] { load_hardware_spec(not_bool); }).find("notbool.yaml:7"), std::string::npos);

  const std::string no_intra = tmp.write("nointra.yaml", head);
  EXPECT_NE(input_error_of([&] { load_hardware_spec(no_intra); }).find("missing required key 'intra_node'"),
            std::string::npos);

  tmp.write("node.yaml", head + "loopback: true\n");
  const std::string cluster = tmp.write(
      "cluster.yaml", "schema_version: 1\nkind: cluster\nname: c\nnode: node.yaml\nnum_nodes: 2\n"
                      "inter_node: {bandwidth_per_gpu: 400 Gb/s, latency: 5 us}\n");
  const std::string e2 = input_error_of([&] { load_hardware_spec(cluster); });
  EXPECT_NE(e2.find("cluster.yaml:5"), std::string::npos) << e2;
  EXPECT_NE(e2.find("a cluster of loopback nodes is not supported"), std::string::npos) << e2;

  const std::string pure = tmp.write(
      "pure.yaml", head + "loopback: true\nalpha_beta:\n  all_to_all: {alpha: 10 us, bandwidth: 10 GB/s}\n"
                          "  gemm: {alpha: 10 us, flop_rate: 100 TFLOP/s}\n  simulate: true\n");
  const std::string e3 = input_error_of([&] { load_hardware_spec(pure); });
  EXPECT_NE(e3.find("pure.yaml:11"), std::string::npos) << e3;
  EXPECT_NE(e3.find("drop simulate or loopback"), std::string::npos) << e3;
}

}  // namespace
}  // namespace moesim
