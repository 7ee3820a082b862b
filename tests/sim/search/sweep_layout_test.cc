// Sweeps over DeepSpeed-TED layouts: the tp axis in the grid, the global token axis (each
// configuration's tokens per GPU derived exactly), the sweep-wide layout options reaching every
// configuration, the same step as simulate_step, and bad degrees or batches refused before any
// simulation, named at their axis.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/report/report.h"
#include "sim/search/sweep.h"
#include "sim/spec/loader.h"

namespace moesim::search {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kRoot = MOESIM_SOURCE_DIR;
const std::string kGptS = kRoot + "/models/moe-gpt-s-64e.yaml";
const std::string kAdira = kRoot + "/hardware/clusters/adira-8x-dgx-a100.yaml";

// MoE-GPT-S on Adira's 64 GPUs at one global batch of 64 x 2048 tokens, every layout of its
// tensor-parallel degrees.
SweepSpec adira_layouts() {
  SweepSpec s;
  s.models.values = {kGptS};
  s.hardware.values = {kAdira};
  s.tokens.values = {131072};
  s.token_unit = TokenUnit::kGlobal;
  s.tp.values = {1, 2, 8};
  s.chunks.values = {1, 2};
  s.strategies.values = {MemoryStrategy::kNone};
  s.routing.values = {"uniform"};
  return s;
}

std::string error_of(const SweepSpec& s) {
  try {
    prepare_sweep(s);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return {};
}

TEST(SweepLayoutTest, GlobalTokensGiveEachLayoutItsTokensPerGpu) {
  const SweepPlan plan = prepare_sweep(adira_layouts());
  ASSERT_EQ(plan.configs.size(), 6u);
  // tp inside tokens, n innermost; T = 131072 over 64 / tp tensor-parallel groups.
  const std::vector<int> tp = {1, 1, 2, 2, 8, 8};
  const std::vector<std::int64_t> per_gpu = {2048, 2048, 4096, 4096, 16384, 16384};
  for (std::size_t i = 0; i < plan.configs.size(); ++i) {
    const SweepConfig& c = plan.configs[i];
    EXPECT_EQ(c.run.tp_size, tp[i]) << i;
    EXPECT_EQ(c.run.num_chunks, 1 + static_cast<int>(i % 2)) << i;
    EXPECT_EQ(c.run.tokens_per_gpu, per_gpu[i]) << i;
    EXPECT_EQ(c.global_tokens, 131072) << i;
    EXPECT_EQ(c.run.ep_size, 0) << i;  // the expert-parallel group spans GPUs / tp
    EXPECT_EQ(c.layout.tp, tp[i]) << i;
    EXPECT_EQ(c.layout.ep, 64 / tp[i]) << i;
    EXPECT_EQ(c.layout.dp, 1) << i;
    EXPECT_EQ(c.drop_duplicate_tokens, tp[i] > 1) << i;
  }
}

TEST(SweepLayoutTest, TokensPerGpuGiveTheGlobalBatch) {
  SweepSpec s = adira_layouts();
  s.token_unit = TokenUnit::kPerGpu;
  s.tokens.values = {4096};
  s.chunks.values = {1};
  const SweepPlan plan = prepare_sweep(s);
  ASSERT_EQ(plan.configs.size(), 3u);
  for (const SweepConfig& c : plan.configs) {
    EXPECT_EQ(c.run.tokens_per_gpu, 4096);
    EXPECT_EQ(c.global_tokens, 64 / c.run.tp_size * 4096);
  }
}

// Every configuration of a sweep over tp simulates the step `moesim simulate` does: the sweep adds
// nothing but the grid. The layout options reach every configuration.
TEST(SweepLayoutTest, EachLayoutStepsAsSimulateStep) {
  SweepSpec s = adira_layouts();
  s.fixed.grad_sync = true;
  s.fixed.zero_stage = 1;
  s.fixed.drop_duplicate_tokens = false;
  const SweepPlan plan = prepare_sweep(s);
  std::vector<std::size_t> all(plan.configs.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const std::vector<SweepOutcome> out = run_sweep(plan, all, 2);
  const SweepTable table = sweep_table(plan, out, "test");
  EXPECT_TRUE(table.grad_sync);
  EXPECT_EQ(table.zero_stage, 1);
  EXPECT_EQ(table.token_unit, TokenUnit::kGlobal);
  const ModelSpec model = load_model_spec(kGptS);
  const ClusterSpec cluster = load_hardware_spec(kAdira);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const SweepConfig& c = plan.configs[i];
    RunSpec run;  // written out by hand, as `moesim simulate --tp ... --no-dtd --grad-sync --zero 1` would
    run.tp_size = c.run.tp_size;
    run.tokens_per_gpu = 131072 / (64 / c.run.tp_size);
    run.num_chunks = c.run.num_chunks;
    run.drop_duplicate_tokens = false;
    run.grad_sync = true;
    run.zero_stage = 1;
    const SimulationResult sim = simulate_step(model, cluster, run);
    EXPECT_EQ(out[i].step_ns, sim.metrics.step_ns) << "tp " << run.tp_size << ", n " << run.num_chunks;
    EXPECT_EQ(out[i].peak_bytes, peak_memory_rank(sim.memory)->peak_device_bytes) << i;
    const SweepRecord& r = table.records[i];
    EXPECT_EQ(r.layout.tp, run.tp_size);
    EXPECT_EQ(r.layout.ep, 64 / run.tp_size);
    EXPECT_EQ(r.layout.dp, 1);
    EXPECT_EQ(r.global_tokens, 131072);
    EXPECT_EQ(r.tokens, run.tokens_per_gpu);
    EXPECT_FALSE(r.drop_duplicate_tokens);
  }
}

TEST(SweepLayoutTest, BadDegreesAndBatchesAreNamedAtTheirAxis) {
  SweepSpec s = adira_layouts();
  s.tp.values = {1, 3};
  s.tp.where = SourceLocation{"grid.yaml", 6, 5};
  EXPECT_THAT(error_of(s), StartsWith("grid.yaml:6:5: tp = 3 (model MoE-GPT-S-64E, hardware"));
  EXPECT_THAT(error_of(s), HasSubstr("tp_size 3 must divide the cluster's GPU count 64"));
  s.tp.where = SourceLocation{};  // given by --tp
  EXPECT_THAT(error_of(s), StartsWith("--tp 3 (model MoE-GPT-S-64E"));

  // BERT-L's d_ffn 4096 does not split over 3 tensor-parallel ranks (3 nodes of 8 GPUs do).
  s = adira_layouts();
  s.models.values = {kRoot + "/models/moe-bert-l-64e.yaml"};
  s.hardware.values = {kRoot + "/hardware/clusters/dgx-a100-2node.yaml"};
  s.gpus.values = {24};
  s.tokens.values = {24 * 1024};
  s.tp.values = {3};
  s.tp.where = SourceLocation{"grid.yaml", 6, 5};
  EXPECT_THAT(error_of(s), StartsWith("grid.yaml:6:5: tp = 3 ("));
  EXPECT_THAT(error_of(s), HasSubstr("d_ffn 4096 is not divisible by tp_size 3"));

  // 64 / 2 = 32 tensor-parallel groups cannot share 131073 tokens.
  s = adira_layouts();
  s.tokens.values = {131072, 131073};
  s.tokens.where = SourceLocation{"grid.yaml", 5, 16};
  EXPECT_THAT(error_of(s), StartsWith("grid.yaml:5:16: global_tokens = 131073 does not divide evenly over the 64 "
                                      "tensor-parallel groups (GPUs / tp = 64 / 1)"));
  s.tokens.where = SourceLocation{};
  EXPECT_THAT(error_of(s), StartsWith("--global-tokens 131073 does not divide evenly"));

  // A chunk needs a slot per expert: at 2048 tokens per GPU (C = 2048 / 64 = 32) and tp 8, n = 32
  // runs (duplicate token dropping pads each one-slot chunk to one slot per tp rank), n = 33 does not.
  s = adira_layouts();
  s.tokens.values = {8 * 2048};
  s.tp.values = {8};
  s.chunks.values = {4, 8, 32};
  EXPECT_NO_THROW(prepare_sweep(s));
  s.chunks.values = {4, 33};
  s.chunks.where = SourceLocation{"grid.yaml", 7, 9};
  EXPECT_THAT(error_of(s), StartsWith("grid.yaml:7:9: n = 33 is above the capacity C = 32 rows per expert"));
  EXPECT_THAT(error_of(s), HasSubstr("each chunk needs at least one row per expert"));
}

}  // namespace
}  // namespace moesim::search
