// Speed of `moesim plan --global-batch`: one planner pass (enumeration, the estimate of every
// legal layout that fits, the full simulation of the best 2K = 10) of GPT-1.7B at sequences of
// 2,048 tokens on A100s (issue 23 item 9 asks for under 60 s on a 2-core machine over >= 1,000
// layouts). Args: GPUs, global batch, threads; the counters say how many layouts were estimated.
#include <benchmark/benchmark.h>

#include <string>

#include "sim/search/layout_planner.h"
#include "sim/spec/loader.h"

namespace {

void BM_LayoutPlanGpt1p7b(benchmark::State& state) {
  moesim::search::LayoutRequest r;
  r.model = moesim::load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/gpt-1.7b.yaml");
  r.cluster = moesim::with_gpus(
      moesim::load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/dgx-a100-80gb-hdr.yaml"),
      state.range(0), moesim::SourceLocation{}, "--gpus");
  r.global_batch = state.range(1);
  r.top = 5;
  r.jobs = static_cast<int>(state.range(2));
  moesim::search::LayoutPlan plan;
  for (auto _ : state) {
    plan = moesim::search::plan_layouts(r);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["considered"] = static_cast<double>(plan.enumeration.considered);
  state.counters["estimated"] = static_cast<double>(plan.estimates.size());
  state.counters["simulated"] = static_cast<double>(plan.simulated.size());
}
BENCHMARK(BM_LayoutPlanGpt1p7b)
    ->Args({16, 128, 1})
    ->Args({16, 128, 2})
    ->Args({64, 512, 2})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
