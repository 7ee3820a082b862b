// Whole-model memory (sim/memory/model_memory.h): the peak extrapolated from fewer simulated
// layers must equal the peak of simulating every layer, rank by rank, for every memory strategy,
// checkpointing mode, tensor parallelism with ZeRO-1 and skewed routing; and the per-layer terms
// are the hand-derived sizes.
#include "sim/memory/model_memory.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

// M = 256, H = 1024, E = 16, top-2, f = 1.25, bf16 with Adam (16 bytes per parameter).
ModelSpec small_model(int layers) {
  ModelSpec s;
  s.name = "small";
  s.d_model = 256;
  s.d_ffn = 1024;
  s.num_experts = 16;
  s.top_k = 2;
  s.capacity_factor = 1.25;
  s.dtype = DType::kBf16;
  s.gemm_dtype = DType::kBf16;
  s.activation = Activation::kGelu;
  s.num_layers = layers;
  return s;
}

RunSpec small_run(int simulated_layers) {
  RunSpec r;
  r.tokens_per_gpu = 1024;
  r.ep_size = 4;
  r.num_chunks = 4;
  r.num_moe_layers = simulated_layers;
  return r;
}

std::vector<ModelMemory> estimate(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) {
  const SimulationResult r = simulate_step(model, cluster, run);
  return model_memory(r.graph, r.memory, model.num_layers, run.num_moe_layers);
}

// The whole model of 3 layers: from 1 and from 2 simulated layers, against all 3 simulated.
void expect_extrapolation_exact(const ClusterSpec& cluster, RunSpec run, const std::string& what) {
  const ModelSpec model = small_model(3);
  run.num_moe_layers = 3;
  const SimulationResult all = simulate_step(model, cluster, run);
  for (int simulated : {1, 2}) {
    run.num_moe_layers = simulated;
    const std::vector<ModelMemory> est = estimate(model, cluster, run);
    ASSERT_EQ(est.size(), all.memory.size()) << what;
    for (std::size_t i = 0; i < est.size(); ++i) {
      EXPECT_EQ(est[i].rank, all.memory[i].rank);
      EXPECT_EQ(est[i].peak_bytes, all.memory[i].peak_device_bytes)
          << what << ", rank " << est[i].rank << ", from " << simulated << " simulated layer(s)";
      EXPECT_GT(est[i].layer_kept_activation_bytes, 0) << what;
    }
  }
}

ClusterSpec two_nodes() { return load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml"); }

TEST(ModelMemory, ExtrapolationEqualsSimulatingEveryLayerForEveryStrategy) {
  for (MemoryStrategy s : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
                           MemoryStrategy::kS4}) {
    for (int slots : {1, 2}) {
      RunSpec run = small_run(1);
      run.strategy = s;
      run.slots = slots;
      expect_extrapolation_exact(two_nodes(), run, std::string(to_string(s)) + " slots " + std::to_string(slots));
    }
  }
}

TEST(ModelMemory, ExtrapolationEqualsSimulatingEveryLayerWithCheckpointing) {
  for (ActivationCheckpointing c : {ActivationCheckpointing::kFull, ActivationCheckpointing::kCommAware}) {
    RunSpec run = small_run(1);
    run.checkpoint = c;
    expect_extrapolation_exact(two_nodes(), run, std::string(to_string(c)));
    run.tp_size = 2;  // cac stashes 1/tp shares with duplicate token dropping
    run.ep_size = 8;
    expect_extrapolation_exact(two_nodes(), run, std::string(to_string(c)) + " tp 2");
  }
}

TEST(ModelMemory, ExtrapolationEqualsSimulatingEveryLayerWithTedAndSkewedRouting) {
  RunSpec ted = small_run(1);
  ted.tp_size = 2;
  ted.ep_size = 4;
  ted.grad_sync = true;
  ted.zero_stage = 1;
  expect_extrapolation_exact(two_nodes(), ted, "tp 2 x ep 4 x dp 2, grad sync, ZeRO-1");
  RunSpec zipf = small_run(1);
  zipf.routing = parse_routing_spec("zipf:1.2", SourceLocation{});
  expect_extrapolation_exact(two_nodes(), zipf, "zipf:1.2, every rank");
}

// Per-layer terms by hand (strategy none, n = 4, ep 4: E_l = 4 local experts; C = 160, R = 2560):
//   model states: 16 B x (E*M + E_l*(M*H + H*M)) = 16 x (4096 + 4*524288) = 33619968;
//   kept: T_I 524288 + T_O 1310720 + scores 32768 + topk 16384 + T_DI 1310720 + T_M 5242880
//         + T_DO 1310720 = 9748480 (tests/sim/memory/general_case_memory_test.cc derives each).
TEST(ModelMemory, PerLayerTermsAreTheHandDerivedSizes) {
  const std::vector<ModelMemory> est = estimate(small_model(10), two_nodes(), small_run(1));
  ASSERT_EQ(est.size(), 1u);
  EXPECT_EQ(est[0].layer_model_state_bytes, 33619968);
  EXPECT_EQ(est[0].layer_kept_activation_bytes, 9748480);
  EXPECT_EQ(est[0].model_layers, 10);
  EXPECT_EQ(est[0].layers_not_simulated(), 9);
  EXPECT_EQ(est[0].peak_bytes, est[0].simulated_peak_bytes + 9 * (33619968 + 9748480));
}

TEST(ModelMemory, AllLayersSimulatedAddsNothing) {
  const std::vector<ModelMemory> est = estimate(small_model(2), two_nodes(), small_run(2));
  ASSERT_EQ(est.size(), 1u);
  EXPECT_EQ(est[0].peak_bytes, est[0].simulated_peak_bytes);
}

TEST(ModelMemory, MoreSimulatedLayersThanTheModelHasIsAnInputError) {
  const SimulationResult r = simulate_step(small_model(3), two_nodes(), small_run(2));
  try {
    model_memory(r.graph, r.memory, 1, 2);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("simulates 2 MoE layers but the model has num_layers = 1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moesim
