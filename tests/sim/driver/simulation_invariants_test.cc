// Invariants of whole simulations, for every model preset, ordering policy and chunk count:
// dependencies respected, no stream runs two tasks at once, step time bounded below by the busiest
// stream and the critical path and above by the sum of all task times, n = 1 equal to the critical
// path when nothing can overlap, and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sim/driver/simulation.h"
#include "sim/graph/graph_algorithms.h"
#include "sim/net/nccl_model.h"
#include "sim/report/report.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

std::vector<std::string> model_presets() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kRoot + "/models"))
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The largest EP size <= 64 that divides the experts (64 GPUs in the cluster).
int ep_for(const ModelSpec& m) {
  for (int ep = 64; ep > 1; ep /= 2)
    if (m.num_experts % ep == 0) return ep;
  return 1;
}

void check_invariants(const TaskGraph& g, const Trace& tr, const ClusterSpec& cluster,
                      const std::string& label) {
  // Every dependency respected.
  for (const auto& [from, to, kind] : g.edges()) {
    ASSERT_LE(tr.records[from].end_ns, tr.records[to].start_ns)
        << label << ": " << g.task(from).id << " -> " << g.task(to).id << " (" << to_string(kind) << ")";
  }
  // No stream runs two tasks at once; tasks on a stream run in issue order.
  std::map<std::pair<int, int>, std::vector<TaskIndex>> by_stream;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i)
    for (int r : g.ranks_of(i)) by_stream[{r, static_cast<int>(g.task(i).stream)}].push_back(i);
  TimeNs max_stream_busy = 0;
  for (const auto& [key, tasks] : by_stream) {
    TimeNs busy = 0;
    for (std::size_t k = 0; k < tasks.size(); ++k) {
      busy += tr.records[tasks[k]].end_ns - tr.records[tasks[k]].start_ns;
      if (k > 0) {
        ASSERT_LE(tr.records[tasks[k - 1]].end_ns, tr.records[tasks[k]].start_ns) << label;
      }
    }
    max_stream_busy = std::max(max_stream_busy, busy);
  }
  const TimeNs step = tr.makespan_ns();
  const StepMetrics m = compute_step_metrics(g, tr);
  EXPECT_EQ(m.step_ns, step) << label;
  // max(total comm, total compute) <= step <= sum of all task times.
  EXPECT_LE(std::max(m.comm_busy_ns, m.compute_busy_ns), step) << label;
  EXPECT_LE(max_stream_busy, step) << label;
  EXPECT_LE(step, m.sum_task_ns) << label;
  // The critical path of isolated durations is a lower bound (interference only slows tasks).
  const CriticalPath cp = critical_path(g, isolated_durations(g, cluster));
  EXPECT_LE(cp.length_ns, step) << label;
  // Exposed times never exceed busy times, and sum to at most the step.
  TimeNs exposed_sum = 0;
  for (const auto& [key, s] : m.stages) {
    EXPECT_LE(s.exposed_ns, s.busy_ns) << label << " " << key;
    exposed_sum += s.exposed_ns;
  }
  EXPECT_LE(exposed_sum, step) << label;
  EXPECT_GE(m.overlap_fraction, 0.0);
  EXPECT_LE(m.overlap_fraction, 1.0);
}

TEST(SimulationInvariants, EveryPresetPolicyAndChunkCount) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  int checked = 0;
  int moe_presets = 0;
  for (const std::string& path : model_presets()) {
    const ModelSpec model = load_model_spec(path);
    if (!model.has_moe_layers()) continue;  // dense presets describe the whole network only
    ++moe_presets;
    for (OrderPolicy order : {OrderPolicy::kSequential, OrderPolicy::kMPipeMoE, OrderPolicy::kFasterMoE,
                              OrderPolicy::kTutel}) {
      for (int n : {1, 2, 4, 8}) {
        RunSpec run;
        run.tokens_per_gpu = 4096;
        run.num_chunks = n;
        run.order = order;
        run.ep_size = ep_for(model);
        const std::string label = model.name + " " + std::string(to_string(order)) + " n=" + std::to_string(n);
        const SimulationResult r = simulate_step(model, cluster, run);
        check_invariants(r.graph, r.trace, cluster, label);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, moe_presets * 16);
  EXPECT_GE(moe_presets, 13);
}

// DeepSpeed-TED layouts of the 64 GPUs (tp x ep x dp), with and without duplicate token dropping,
// every memory strategy, activation checkpointing (full and communication-aware), the gradient
// all-reduces and ZeRO-1, in both network models (the flow model simulates every rank of a replica
// with tp > 1).
TEST(SimulationInvariants, TensorExpertDataParallelLayouts) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  const ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  struct Case {
    int tp, ep;
    bool dtd;
    MemoryStrategy strategy;
    OrderPolicy order;
    NetworkModel network;
    ActivationCheckpointing checkpoint = ActivationCheckpointing::kNone;
  };
  const Case cases[] = {
      {2, 0, true, MemoryStrategy::kNone, OrderPolicy::kMPipeMoE, NetworkModel::kFlow},
      {8, 0, true, MemoryStrategy::kS1, OrderPolicy::kMPipeMoE, NetworkModel::kAlphaBeta},
      {8, 0, false, MemoryStrategy::kS4, OrderPolicy::kFasterMoE, NetworkModel::kFlow},
      {4, 4, true, MemoryStrategy::kS2, OrderPolicy::kTutel, NetworkModel::kAlphaBeta},
      {2, 8, true, MemoryStrategy::kS3, OrderPolicy::kSequential, NetworkModel::kFlow},
      {4, 0, true, MemoryStrategy::kNone, OrderPolicy::kMPipeMoE, NetworkModel::kAlphaBeta, ActivationCheckpointing::kFull},
      {2, 0, true, MemoryStrategy::kNone, OrderPolicy::kFasterMoE, NetworkModel::kFlow, ActivationCheckpointing::kCommAware},
      {1, 0, true, MemoryStrategy::kNone, OrderPolicy::kTutel, NetworkModel::kFlow, ActivationCheckpointing::kCommAware},
  };
  for (const Case& c : cases) {
    for (bool grad : {false, true}) {
      RunSpec run;
      run.tokens_per_gpu = 4096;
      run.num_chunks = 2;
      run.tp_size = c.tp;
      run.ep_size = c.ep;
      run.drop_duplicate_tokens = c.dtd;
      run.strategy = c.strategy;
      run.order = c.order;
      run.network = c.network;
      run.grad_sync = grad;
      run.zero_stage = grad ? 1 : 0;
      run.checkpoint = c.checkpoint;
      run.num_moe_layers = 2;
      const std::string label = "tp " + std::to_string(c.tp) + " ep " + std::to_string(c.ep) + " dtd " +
                                std::to_string(c.dtd) + " " + std::string(to_string(c.strategy)) + " " +
                                std::string(to_string(c.order)) + " " + std::string(to_string(c.network)) +
                                " grad " + std::to_string(grad) + " checkpoint " +
                                std::string(to_string(c.checkpoint));
      const SimulationResult r = simulate_step(model, cluster, run);
      check_invariants(r.graph, r.trace, cluster, label);
    }
  }
}

TEST(SimulationInvariants, AllRanksMatchTheRepresentativeRankWhenBalanced) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  const ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-s-16e.yaml");
  RunSpec run;
  run.tokens_per_gpu = 2048;
  run.num_chunks = 4;
  BuildOptions all;
  all.representative_rank = false;
  const SimulationResult rep = simulate_step(model, cluster, run);
  const SimulationResult full = simulate_step(model, cluster, run, all);
  EXPECT_EQ(full.graph.simulated_ranks().size(), 16u);
  EXPECT_EQ(rep.metrics.step_ns, full.metrics.step_ns);
  EXPECT_EQ(rep.metrics.forward_ns, full.metrics.forward_ns);
  check_invariants(full.graph, full.trace, cluster, "all ranks");
}

// With n = 1, no shared expert and one MoE layer, every task waits for the previous one, so the
// step is exactly the critical path of isolated durations (no interference can occur).
TEST(SimulationInvariants, SingleChunkStepEqualsCriticalPath) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  for (const char* name : {"moe-gpt-s-64e", "moe-bert-l-64e", "moe-gpt-xl-64e"}) {
    const ModelSpec model = load_model_spec(kRoot + "/models/" + name + ".yaml");
    for (OrderPolicy order : {OrderPolicy::kSequential, OrderPolicy::kMPipeMoE, OrderPolicy::kFasterMoE,
                              OrderPolicy::kTutel}) {
      RunSpec run;
      run.tokens_per_gpu = 8192;
      run.num_chunks = 1;
      run.order = order;
      const SimulationResult r = simulate_step(model, cluster, run);
      const std::vector<TimeNs> iso = isolated_durations(r.graph, cluster);
      const CriticalPath cp = critical_path(r.graph, iso);
      EXPECT_EQ(r.metrics.step_ns, cp.length_ns) << name << " " << to_string(order);
      TimeNs sum = 0;
      for (TimeNs d : iso) sum += d;
      EXPECT_EQ(r.metrics.step_ns, sum) << name << ": everything is serial at n = 1";
    }
  }
}

TEST(SimulationInvariants, PipeliningHidesCommunication) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  const ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-xl-64e.yaml");
  RunSpec run;
  run.tokens_per_gpu = 8192;
  run.num_chunks = 1;
  const TimeNs t1 = simulate_step(model, cluster, run).metrics.step_ns;
  run.num_chunks = 4;
  const SimulationResult r4 = simulate_step(model, cluster, run);
  EXPECT_LT(r4.metrics.step_ns, t1);
  EXPECT_GT(r4.metrics.overlap_fraction, 0.3);
  run.order = OrderPolicy::kSequential;
  EXPECT_GT(simulate_step(model, cluster, run).metrics.step_ns, r4.metrics.step_ns);
}

TEST(SimulationInvariants, IdenticalInputsGiveByteIdenticalReports) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  const ModelSpec model = load_model_spec(kRoot + "/models/deepseek-v3.yaml");
  RunSpec run;
  run.tokens_per_gpu = 4096;
  run.num_chunks = 4;
  std::string first;
  for (int i = 0; i < 2; ++i) {
    const SimulationResult r = simulate_step(model, cluster, run);
    const ReportInputs in{model, cluster, run, r.dims, r.graph, r.trace, r.metrics, r.memory, "test"};
    const std::string text = report_json(in) + perfetto_trace_json(r.graph, r.trace, r.memory);
    if (i == 0) {
      first = text;
    } else {
      EXPECT_EQ(first, text);
    }
  }
}

}  // namespace
}  // namespace moesim

namespace moesim {
namespace {

// An EP group of 12 on 8-GPU nodes is uneven (rank 0 has 7 local peers, rank 8 only 3): the
// representative rank must still see the slowest member's all-to-all time.
TEST(SimulationInvariants, UnevenGroupRepresentativeMatchesAllRanks) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml");
  ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-s-16e.yaml");
  model.num_experts = 24;
  RunSpec run;
  run.tokens_per_gpu = 2048;
  run.num_chunks = 2;
  ClusterSpec three = cluster;  // 3 nodes x 8 GPUs; the EP group is ranks 0..11
  three.num_nodes = 3;
  run.ep_size = 12;
  BuildOptions all;
  all.representative_rank = false;
  const SimulationResult rep = simulate_step(model, three, run);
  const SimulationResult full = simulate_step(model, three, run, all);
  EXPECT_EQ(rep.metrics.step_ns, full.metrics.step_ns);
}

// Dispatch and combine on separate streams share the rank's links: running them together is
// not faster than their summed isolated time on the same links, less NCCL's latency of each (the
// rounds of peers hold no link, so two all-to-alls in flight overlap them).
TEST(SimulationInvariants, ConcurrentCollectivesShareTheLinks) {
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  const ModelSpec model = load_model_spec(kRoot + "/models/moe-gpt-s-64e.yaml");
  RunSpec run;
  run.tokens_per_gpu = 8192;
  run.num_chunks = 4;
  const SimulationResult r = simulate_step(model, cluster, run);
  const std::vector<TimeNs> iso = isolated_durations(r.graph, cluster);
  TimeNs comm_bytes = 0;
  for (TaskIndex i = 0; i < r.graph.num_tasks(); ++i) {
    const auto* w = std::get_if<CollectiveWork>(&r.graph.task(i).work);
    if (w == nullptr) continue;
    ASSERT_EQ(w->op, CollectiveOp::kAllToAll);
    const std::vector<int>& group = r.graph.group(w->group);
    const auto p = static_cast<int>(group.size());
    const auto lat = [&](int s, int d) {
      return cluster.node_of(group[static_cast<std::size_t>(s)]) == cluster.node_of(group[static_cast<std::size_t>(d)])
                 ? cluster.node.intra_node.latency_ns
                 : cluster.inter_node.latency_ns;
    };
    comm_bytes += iso[i] - static_cast<TimeNs>(all_to_all_latency_ns(cluster.node.nccl, p, lat, 1'000'000'000));
  }
  EXPECT_GT(comm_bytes, 0);
  EXPECT_GE(r.metrics.comm_busy_ns, comm_bytes);
}

}  // namespace
}  // namespace moesim
