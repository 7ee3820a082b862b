// Network model speed (issue 5): a 64 MiB-per-rank all-to-all on the rail-optimised DGX A100
// preset, grown from 128 to 4,096 GPUs (16-node leaves, 8 rails, non-blocking), with the class
// aggregation of collective_plan.h and, on small sizes, one flow per pair for comparison; and a
// whole MoE layer step (forward and backward, n = 4) on 1,024 GPUs under the
// flow model, with uniform routing (one representative rank) and with zipf:1.2 routing (every rank
// simulated, all-to-allv coflows); 4,096 ranks with zipf:1.2 and a 1 MiB-1 GiB all-reduce sweep on
// 4,096 GPUs. Each iteration builds the topology and the plan from scratch.
#include <benchmark/benchmark.h>

#include <numeric>
#include <string>

#include "sim/driver/simulation.h"
#include "sim/net/flow_network.h"
#include "sim/spec/loader.h"

namespace {

using namespace moesim;

ClusterSpec rail_cluster(int gpus) {
  ClusterSpec c = load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/dgx-a100-1024gpu-rail.yaml");
  c.num_nodes = gpus / c.node.gpus_per_node;
  return c;
}

void all_to_all(benchmark::State& state, bool aggregate) {
  const int n = static_cast<int>(state.range(0));
  const ClusterSpec c = rail_cluster(n);
  std::vector<int> group(static_cast<std::size_t>(n));
  std::iota(group.begin(), group.end(), 0);
  const CollectiveWork work{CollectiveOp::kAllToAll, 0, 64 * kMiB / n};
  TimeNs t = 0;
  std::size_t flows = 0;
  for (auto _ : state) {
    const ClusterTopology topo(c);
    PlanOptions options;
    options.aggregate = aggregate;
    auto plan = std::make_shared<const CollectivePlan>(plan_collective(topo, c, work, group, options));
    flows = plan->phases[0].flows.size();
    t = FlowSimulator::run_alone(topo, plan);
    benchmark::DoNotOptimize(t);
  }
  state.SetComplexityN(n);
  state.counters["simulated_us"] = static_cast<double>(t) / 1e3;
  state.counters["flow_entries"] = static_cast<double>(flows);
  state.counters["busbw_GBps"] = 64.0 * kMiB / static_cast<double>(t) * (n - 1) / n;
}

void BM_RailAllToAll64MiB(benchmark::State& state) { all_to_all(state, true); }
BENCHMARK(BM_RailAllToAll64MiB)->RangeMultiplier(2)->Range(128, 4096)->Unit(benchmark::kMillisecond)->Complexity();

void BM_RailAllToAll64MiBPerPair(benchmark::State& state) { all_to_all(state, false); }
BENCHMARK(BM_RailAllToAll64MiBPerPair)->RangeMultiplier(2)->Range(64, 512)->Unit(benchmark::kMillisecond)->Complexity();

// The MoE layer of the speed targets: one expert per GPU, top-2, B = 8192.
void moe_step(benchmark::State& state, int gpus, const RoutingSpec& routing, int tp = 1, int ep = 0,
              bool grad_sync = false, int chunks = 4) {
  ModelSpec model;
  model.name = "bench-moe";
  model.d_model = 1024;
  model.d_ffn = 4096;
  model.num_experts = gpus;
  model.top_k = 2;
  model.capacity_factor = 1.25;
  model.dtype = DType::kBf16;
  model.gemm_dtype = DType::kBf16;
  model.activation = Activation::kGelu;
  const ClusterSpec c = rail_cluster(gpus);
  RunSpec run;
  run.tokens_per_gpu = 8192;
  run.num_chunks = chunks;
  run.network = NetworkModel::kFlow;
  run.routing = routing;
  run.tp_size = tp;
  run.ep_size = ep;
  run.grad_sync = grad_sync;
  TimeNs step = 0;
  std::size_t ranks = 0;
  for (auto _ : state) {
    SimulationResult r = simulate_step(model, c, run);
    step = r.metrics.step_ns;
    ranks = r.graph.simulated_ranks().size();
    benchmark::DoNotOptimize(step);
  }
  state.counters["simulated_step_ms"] = static_cast<double>(step) / 1e6;
  state.counters["simulated_ranks"] = static_cast<double>(ranks);
}

void BM_MoeStep1024Uniform(benchmark::State& state) { moe_step(state, 1024, RoutingSpec{}); }
BENCHMARK(BM_MoeStep1024Uniform)->Unit(benchmark::kMillisecond);

// Zipf routing (s = 1.2): every rank simulated, all-to-allv of the routed rows.
void BM_MoeStep1024Zipf(benchmark::State& state) {
  moe_step(state, 1024, parse_routing_spec("zipf:1.2", SourceLocation{}));
}
BENCHMARK(BM_MoeStep1024Zipf)->Unit(benchmark::kMillisecond)->Iterations(1);

// DeepSpeed-TED on the same 1,024 GPUs: tp 8 x ep 128 (the flow model simulates every rank of the
// replica), and tp 8 x ep 64 x dp 2 with the gradient all-reduces between the replicas; n = 2
// (duplicate token dropping needs C = 20 rounded to a multiple of n x tp: 16).
// Every rank of 4,096 simulated with zipf:1.2 routing (the usability issue's target: under 2 s
// and 500 MB; RSS is not measured here: `/usr/bin/time -f %M moesim simulate ...`).
void BM_MoeStep4096Zipf(benchmark::State& state) {
  moe_step(state, 4096, parse_routing_spec("zipf:1.2", SourceLocation{}), 1, 0, false, 1);
}
BENCHMARK(BM_MoeStep4096Zipf)->Unit(benchmark::kMillisecond)->Iterations(1);

// `moesim collective --op all-reduce -b 1M -e 1G` on 4,096 GPUs: eleven ring all-reduces alone.
void BM_AllReduceSweep4096(benchmark::State& state) {
  const ClusterSpec c = rail_cluster(4096);
  std::vector<int> group(4096);
  std::iota(group.begin(), group.end(), 0);
  TimeNs largest = 0;
  for (auto _ : state) {
    const ClusterTopology topo(c);
    for (std::int64_t bytes = kMiB; bytes <= kGiB; bytes *= 2) {
      const CollectiveWork work{CollectiveOp::kAllReduce, 0, bytes / 4096};
      largest = FlowSimulator::run_alone(
          topo, std::make_shared<const CollectivePlan>(plan_collective(topo, c, work, group, PlanOptions{})));
    }
    benchmark::DoNotOptimize(largest);
  }
  state.counters["simulated_1GiB_us"] = static_cast<double>(largest) / 1e3;
}
BENCHMARK(BM_AllReduceSweep4096)->Unit(benchmark::kMillisecond);

void BM_MoeStep1024Tp8(benchmark::State& state) { moe_step(state, 1024, RoutingSpec{}, 8, 0, false, 2); }
BENCHMARK(BM_MoeStep1024Tp8)->Unit(benchmark::kMillisecond)->Iterations(1);
void BM_MoeStep1024Tp8GradSync(benchmark::State& state) { moe_step(state, 1024, RoutingSpec{}, 8, 64, true, 2); }
BENCHMARK(BM_MoeStep1024Tp8GradSync)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
