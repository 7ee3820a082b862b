// `moesim model`: the whole-network description and its parameter counts, as text and JSON, and
// the models it refuses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

TEST_F(Cli, ModelPrintsTheNetworkAndItsCountsAgainstThePublishedOnes) {
  const Result text = run("model --model deepseek-v3");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("61 (3 dense, 58 MoE: every layer after the first 3)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("published 671.00 B: +0.00%"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("MTP modules (apart)"), std::string::npos) << text.out;

  const Result json = run("model --model deepseek-v3 --json -");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  const nlohmann::json& p = j["parameters"];
  EXPECT_EQ(j["moe_layers"], 58);
  EXPECT_EQ(j["dense_layers"], 3);
  // The blocks add up to the total, and the JSON's total is the one the text rounds.
  std::int64_t sum = 0;
  for (const char* block : {"embedding", "positions", "output_head", "attention", "dense_mlp", "routed_experts",
                            "shared_experts", "routers", "norms"})
    sum += p[block].get<std::int64_t>();
  EXPECT_EQ(p["total"].get<std::int64_t>(), sum);
  EXPECT_NEAR(p["total"].get<double>(), 671.03e9, 0.005e9);
  EXPECT_EQ(j["published"]["total"], 671e9);
}

TEST_F(Cli, ModelRefusesALayerOnlyFileAndSimulateRefusesADenseModel) {
  const Result layer = run("model --model moe-gpt-s-64e");
  EXPECT_EQ(layer.exit_code, 2);
  EXPECT_NE(layer.err.find("moe-gpt-s-64e.yaml:6:1: model MoE-GPT-S-64E has no architecture section"),
            std::string::npos)
      << layer.err;
  const Result dense = run("simulate --model llama-3-70b --hardware adira-8x-dgx-a100 --tokens 4096");
  EXPECT_EQ(dense.exit_code, 2);
  EXPECT_NE(dense.err.find("model Llama-3-70B has no MoE layer (every one of its 80 layers is dense)"),
            std::string::npos)
      << dense.err;
  const Result described = run("model --model llama-3-70b");
  EXPECT_EQ(described.exit_code, 0) << described.err;
  EXPECT_NE(described.out.find("80 (80 dense, 0 MoE)"), std::string::npos) << described.out;
}

TEST_F(Cli, ModelStatesPerGpuFollowTheLayout) {
  const Result json = run("model --model gpt-175b --tp 8 --pp 12 --dp 8 --zero 1 --json -");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json stages = nlohmann::json::parse(json.out)["model_states_per_gpu"];
  ASSERT_EQ(stages.size(), 12u);
  // Megatron's distributed optimizer: 6 + 12/dp bytes a parameter.
  const double params = stages[0]["dense_parameters"].get<double>();
  EXPECT_NEAR(stages[0]["bytes"].get<double>(), params * (6 + 12.0 / 8), 1e-6 * params);
  // Stage 0 by hand (h 12,288): 8 layers, each 12h^2 + 7h (projections, column-parallel biases)
  // over tp 8 and 6h whole (row-parallel biases, two layer norms), the 51,200 x h table over tp 8,
  // the 2,048 learned positions whole.
  constexpr double h = 12288;
  EXPECT_EQ(params, 8 * ((12 * h * h + 7 * h) / 8 + 6 * h) + 51200 * h / 8 + 2048 * h);
  const Result bad = run("model --model deepseek-v3 --pp 8");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--pp 8 must divide the model's layers (61)"), std::string::npos) << bad.err;
}

}  // namespace
