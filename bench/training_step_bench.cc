// Speed of the whole training step (issue 23, "Speed"): DeepSeek-V3 on 1,024 H100s with tp 2, pp 8,
// vpp 4, ep 64, global batch 8,192 sequences of 4,096 tokens (the layout the issue names; its 61
// layers split 1, 2, ..., 2, 0 over the 32 model parts), alpha-beta network (goal: under 2 s on this
// 2-core machine) and flow network (goal: under 10 s), and GPT-1T on 512 A100s as Korthikanti et al. ran it (tp 8, pp 64, 512
// microbatches). Building the graph, running the engine and the report's figures are all timed.
#include <benchmark/benchmark.h>

#include <string>

#include "sim/spec/loader.h"
#include "sim/step/step_simulation.h"

namespace {

moesim::ClusterSpec cluster(const char* file, int gpus) {
  return moesim::with_gpus(moesim::load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/" + file),
                           gpus, moesim::SourceLocation{}, "--gpus");
}

void run(benchmark::State& state, const char* model_file, const moesim::ClusterSpec& c, const moesim::StepSpec& s,
         moesim::NetworkModel network = moesim::NetworkModel::kAlphaBeta) {
  const moesim::ModelSpec model = moesim::load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/" + model_file);
  std::size_t tasks = 0;
  for (auto _ : state) {
    const moesim::SimulatedStep sim = moesim::simulate_training_step(
        model, c, s, moesim::NetworkChoice{network, moesim::AllToAllAlgorithm::kPairwise});
    tasks = sim.report.tasks;
    benchmark::DoNotOptimize(sim.report.step_ns);
  }
  state.counters["tasks"] = static_cast<double>(tasks);
}

moesim::StepSpec deepseek_v3_1024() {
  moesim::StepSpec s;
  s.layout = moesim::StepLayout{1024, 2, 8, 4, 64, 1};
  s.global_batch = 8192;
  s.seq = 4096;
  s.sequence_parallel = true;
  s.part_layers.assign(32, 2);
  s.part_layers.front() = 1;
  s.part_layers.back() = 0;
  return s;
}

void BM_DeepSeekV3Step1024(benchmark::State& state) {
  run(state, "deepseek-v3.yaml", cluster("dgx-h100-ndr.yaml", 1024), deepseek_v3_1024());
}
BENCHMARK(BM_DeepSeekV3Step1024)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

// The same with the host's launches (--host-launch-us 10, sim/engine/host_issue.h): the engine's
// issue queue and the hosts' waits on every layer's split sizes.
void BM_DeepSeekV3Step1024HostLaunches(benchmark::State& state) {
  moesim::StepSpec s = deepseek_v3_1024();
  s.host_launch_ns = 10'000;
  run(state, "deepseek-v3.yaml", cluster("dgx-h100-ndr.yaml", 1024), s);
}
BENCHMARK(BM_DeepSeekV3Step1024HostLaunches)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_DeepSeekV3Step1024Flow(benchmark::State& state) {
  run(state, "deepseek-v3.yaml", cluster("dgx-h100-ndr.yaml", 1024), deepseek_v3_1024(), moesim::NetworkModel::kFlow);
}
BENCHMARK(BM_DeepSeekV3Step1024Flow)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_Gpt1tStep512(benchmark::State& state) {
  moesim::StepSpec s;
  s.layout = moesim::StepLayout{512, 8, 64, 1, 1, 1};
  s.global_batch = 512;
  s.recompute = moesim::Recompute::kSelective;
  s.sequence_parallel = true;
  s.attention = moesim::AttentionKernel::kUnfused;
  run(state, "gpt-1t.yaml", cluster("dgx-a100-80gb-hdr.yaml", 512), s);
}
BENCHMARK(BM_Gpt1tStep512)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
