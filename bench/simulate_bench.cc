// Simulator speed: building and simulating one MoE layer (forward + backward) at n = 8 on a
// 64-GPU cluster (8 x DGX A100), with one representative rank and with every rank simulated.
#include <benchmark/benchmark.h>

#include <string>

#include "sim/driver/simulation.h"
#include "sim/spec/loader.h"

namespace {

using namespace moesim;

struct Inputs {
  ModelSpec model = load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/moe-gpt-s-64e.yaml");
  ClusterSpec cluster =
      load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  RunSpec run = [] {
    RunSpec r;
    r.tokens_per_gpu = 8192;
    r.num_chunks = 8;
    return r;
  }();
};

const Inputs& inputs() {
  static const Inputs in;
  return in;
}

void BM_BuildGraph(benchmark::State& state) {
  BuildOptions opt;
  opt.representative_rank = state.range(0) == 0;
  for (auto _ : state) {
    TaskGraph g = build_moe_graph(inputs().model, inputs().cluster, inputs().run, opt);
    benchmark::DoNotOptimize(g.num_tasks());
  }
}
BENCHMARK(BM_BuildGraph)->Arg(0)->Arg(1)->ArgNames({"all_ranks"})->Unit(benchmark::kMillisecond);

void BM_BuildAndSimulate(benchmark::State& state) {
  BuildOptions opt;
  opt.representative_rank = state.range(0) == 0;
  std::size_t tasks = 0;
  for (auto _ : state) {
    SimulationResult r = simulate_step(inputs().model, inputs().cluster, inputs().run, opt);
    tasks = r.graph.num_tasks();
    benchmark::DoNotOptimize(r.metrics.step_ns);
  }
  state.counters["tasks"] = static_cast<double>(tasks);
}
BENCHMARK(BM_BuildAndSimulate)->Arg(0)->Arg(1)->ArgNames({"all_ranks"})->Unit(benchmark::kMillisecond);

}  // namespace
