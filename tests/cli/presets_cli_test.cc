// `moesim presets`, bundled presets picked by name, and --gpus / --nodes scaling a cluster preset.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

TEST_F(Cli, PresetsListsEveryKindWithSizeAndSource) {
  const Result all = run("presets");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  for (const char* header : {"# models (", "# clusters (", "# nodes (", "# gpus ("})
    EXPECT_NE(all.out.find(header), std::string::npos) << header;
  const Result models = run("presets models");
  ASSERT_EQ(models.exit_code, 0) << models.err;
  EXPECT_NE(models.out.find("deepseek-v3"), std::string::npos);
  EXPECT_NE(models.out.find("256 experts top-8, d_model 7168, 61 layers, 1 shared, 671.0B parameters"), std::string::npos)
      << models.out;
  EXPECT_EQ(models.out.find("# clusters"), std::string::npos);
  const Result clusters = run("presets clusters");
  EXPECT_NE(clusters.out.find("adira-8x-dgx-a100"), std::string::npos) << clusters.out;
  EXPECT_NE(clusters.out.find("8 nodes x 8 = 64 x A100-SXM4-40GB 40.0 GiB"), std::string::npos) << clusters.out;
  const Result bad = run("presets engines");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("presets: unknown kind 'engines'; valid: models, clusters, nodes, gpus"), std::string::npos)
      << bad.err;
}

TEST_F(Cli, ModelAndHardwareTakeBundledNames) {
  const Result byname = run("simulate --model moe-gpt-s-64e --hardware adira-8x-dgx-a100 --tokens 4096 --chunks 4 --json -");
  const Result byfile = run(kQuickSimulate + " --json -");
  ASSERT_EQ(byname.exit_code, 0) << byname.err;
  ASSERT_EQ(byfile.exit_code, 0) << byfile.err;
  EXPECT_EQ(nlohmann::json::parse(byname.out)["step_time_us"], nlohmann::json::parse(byfile.out)["step_time_us"]);
  const Result typo = run("simulate --model moe-gpt-s-64 --hardware dgx-a100 --tokens 4096");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("--model 'moe-gpt-s-64' is neither a file nor the name of a bundled model; closest: "
                          "moe-gpt-s-64e"),
            std::string::npos)
      << typo.err;
  const Result hw = run("plan --model moe-gpt-s-64e --hardware dgx-z100 --tokens 4096");
  EXPECT_EQ(hw.exit_code, 2);
  EXPECT_NE(hw.err.find("--hardware 'dgx-z100' is neither a file nor the name of a bundled cluster, node or GPU"),
            std::string::npos)
      << hw.err;
  const Result sweep = run("sweep --model moe-gpt-s-64e --hardware dgx-a100-2node --gpus 8 --tokens 2048 --chunks 1 "
                           "--strategies none --csv -");
  EXPECT_EQ(sweep.exit_code, 0) << sweep.err;
}

TEST_F(Cli, GpusAndNodesScaleAClusterPreset) {
  // Adira is 8 DGX A100 nodes; --gpus 16 and --nodes 2 are the 2-node preset's cluster.
  const Result two = run("simulate --model moe-gpt-s-64e --hardware dgx-a100-2node --tokens 4096 --json -");
  const Result gpus = run("simulate --model moe-gpt-s-64e --hardware adira-8x-dgx-a100 --gpus 16 --tokens 4096 --json -");
  const Result nodes = run("simulate --model moe-gpt-s-64e --hardware adira-8x-dgx-a100 --nodes 2 --tokens 4096 --json -");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  const auto t = nlohmann::json::parse(two.out), g = nlohmann::json::parse(gpus.out), n = nlohmann::json::parse(nodes.out);
  EXPECT_EQ(g["step_time_us"], n["step_time_us"]);
  EXPECT_EQ(g["config"]["run"]["ep_size"], 16);
  EXPECT_EQ(t["config"]["run"]["ep_size"], 16);
  const Result uneven = run("simulate --model moe-gpt-s-64e --hardware adira-8x-dgx-a100 --gpus 12 --tokens 4096");
  EXPECT_EQ(uneven.exit_code, 2);
  EXPECT_NE(uneven.err.find("--gpus = 12 is not a multiple of the 8 GPUs per node"), std::string::npos) << uneven.err;
  const Result lone = run("simulate --model moe-gpt-s-64e --hardware dgx-a100 --nodes 2 --tokens 4096");
  EXPECT_EQ(lone.exit_code, 2);
  EXPECT_NE(lone.err.find("has no inter_node link"), std::string::npos) << lone.err;
  EXPECT_EQ(run("simulate --model moe-gpt-s-64e --hardware dgx-a100 --gpus 8 --nodes 1 --tokens 4096").exit_code, 2);
  // A cluster's size is bounded before anything is built (its topology alone is about 1.6 KB a GPU).
  const Result huge = run("simulate --model moe-gpt-s-64e --hardware adira-8x-dgx-a100 --nodes 1048576 --ep 8 "
                          "--tokens 4096");
  EXPECT_EQ(huge.exit_code, 2);
  EXPECT_NE(huge.err.find("--nodes 1048576: GPUs = 8388608 is more than the limit of 262144 GPUs in a cluster"),
            std::string::npos)
      << huge.err;
  std::string file = read_file(fs::path(MOESIM_SOURCE_DIR) / "hardware/clusters/adira-8x-dgx-a100.yaml");
  const auto key = file.find("num_nodes: 8");
  ASSERT_NE(key, std::string::npos);
  file.replace(key, 12, "num_nodes: 1048576");
  const auto node = file.find("../nodes/");
  ASSERT_NE(node, std::string::npos);
  file.replace(node, 3, std::string(MOESIM_SOURCE_DIR) + "/hardware/");
  const fs::path big = write("big.yaml", file);
  const Result big_file = run("simulate --model moe-gpt-s-64e --hardware " + big.string() + " --ep 8 --tokens 4096");
  EXPECT_EQ(big_file.exit_code, 2);
  EXPECT_NE(big_file.err.find("num_nodes: 1048576 nodes of 8 GPUs are more than the limit of 262144 GPUs"),
            std::string::npos)
      << big_file.err;
  const Result plan = run("plan --model moe-gpt-s-64e --hardware dgx-a100-2node --nodes 4 --tokens 4096 --chunks 1 "
                          "--strategies none");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("(32 GPUs, EP 32)"), std::string::npos) << plan.out;
}

}  // namespace
