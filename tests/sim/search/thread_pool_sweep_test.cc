// The thread pool (results by index, first failure rethrown) and the sweep grid (order, GPU-count
// axis, validation before work).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/search/sweep.h"
#include "sim/search/thread_pool.h"

namespace moesim::search {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

TEST(ThreadPoolTest, EveryIndexOnceWhateverTheJobs) {
  for (int jobs : {1, 2, 7}) {
    std::vector<int> hits(1000, 0);
    std::atomic<std::size_t> last_progress{0};
    parallel_for(hits.size(), jobs, [&](std::size_t i) { hits[i] += 1; },
                 [&](std::size_t done) { last_progress = done; });
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 1000) << jobs;
    EXPECT_EQ(last_progress.load(), 1000u);
  }
  EXPECT_THROW(parallel_for(3, 0, [](std::size_t) {}), InputError);
  parallel_for(0, 2, [](std::size_t) { FAIL(); });
}

TEST(ThreadPoolTest, TheLowestFailingIndexIsRethrown) {
  try {
    parallel_for(100, 1, [](std::size_t i) {
      if (i == 40 || i == 70) throw std::runtime_error("at " + std::to_string(i));
    });
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "at 40");
  }
}

SweepSpec spec() {
  SweepSpec s;
  s.models.values = {kRoot + "/models/moe-gpt-s-64e.yaml"};
  s.hardware.values = {kRoot + "/hardware/clusters/dgx-a100-2node.yaml"};
  s.gpus.values = {8, 16};
  s.tokens.values = {1024, 2048};
  s.chunks.values = {1, 2};
  s.strategies.values = {MemoryStrategy::kNone, MemoryStrategy::kS4};
  s.routing.values = {"uniform"};
  return s;
}

TEST(SweepTest, RoutingAxisRunsEveryRoutingValue) {
  SweepSpec s = spec();
  s.gpus.values = {16};
  s.tokens.values = {4096};
  s.chunks.values = {2};
  s.strategies.values = {MemoryStrategy::kNone};
  s.routing.values = {"uniform", "zipf:0", "zipf:1.5"};
  const SweepPlan plan = prepare_sweep(s);
  ASSERT_EQ(plan.configs.size(), 3u);
  EXPECT_TRUE(plan.configs[0].run.routing.balanced());
  EXPECT_EQ(plan.configs[2].run.routing.kind, RoutingKind::kZipf);
  EXPECT_EQ(plan.configs[2].routing, "zipf:1.5");
  const std::vector<SweepOutcome> out = run_sweep(plan, {0, 1, 2}, 2, nullptr);
  // zipf:0 routes exactly the padded rows here (k*B/E = C = 64); zipf:1.5 drops most tokens of the
  // hot experts and leaves the cold ones nearly idle: a different step.
  EXPECT_NEAR(static_cast<double>(out[1].step_ns) / static_cast<double>(out[0].step_ns), 1.0, 0.01);
  EXPECT_NE(out[2].step_ns, out[0].step_ns);
  const SweepTable t = sweep_table(plan, out, "test");
  EXPECT_EQ(t.records[2].routing, "zipf:1.5");
}

TEST(SweepTest, GridOrderAndGpuAxis) {
  const SweepPlan plan = prepare_sweep(spec());
  ASSERT_EQ(plan.configs.size(), 16u);
  ASSERT_EQ(plan.clusters.size(), 2u);
  EXPECT_EQ(plan.clusters[0].num_gpus(), 8);   // one node of the 2-node preset
  EXPECT_EQ(plan.clusters[1].num_gpus(), 16);
  // n innermost, then strategy, tokens, GPUs.
  EXPECT_EQ(plan.configs[1].run.num_chunks, 2);
  EXPECT_EQ(plan.configs[2].run.strategy, MemoryStrategy::kS4);
  EXPECT_EQ(plan.configs[4].run.tokens_per_gpu, 2048);
  EXPECT_EQ(plan.configs[8].cluster, 1);
  // Any subset, any jobs: the same outcomes by index.
  std::vector<std::size_t> all(plan.configs.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const auto one = run_sweep(plan, all, 1);
  const auto two = run_sweep(plan, all, 2);
  const auto odd = run_sweep(plan, {1, 3, 5}, 2);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(one[i].step_ns, two[i].step_ns);
  EXPECT_EQ(odd[2].peak_bytes, one[5].peak_bytes);
  const SweepTable t = sweep_table(plan, one, "test");
  EXPECT_EQ(t.records[8].gpus, 16);
  EXPECT_GT(t.records[0].step_ns, 0);
}

TEST(SweepTest, BadGridsFailBeforeAnyWork) {
  SweepSpec s = spec();
  s.tokens.values.clear();
  EXPECT_THROW(prepare_sweep(s), InputError);
  s = spec();
  s.chunks.values = {64};  // C = 16 at 1024 tokens
  s.chunks.where = SourceLocation{"grid.yaml", 7, 9};
  try {
    prepare_sweep(s);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("grid.yaml:7:9: n = 64 is above the capacity C = 16", 0), 0u) << e.what();
  }
  s = spec();
  s.routing.values = {"zipf:-1"};
  EXPECT_THROW(prepare_sweep(s), InputError);
  s.routing.values = {"matrix:" + kRoot + "/no-such-routing.csv"};
  EXPECT_THROW(prepare_sweep(s), InputError);
  s = spec();
  s.gpus.values = {24};  // 64 experts do not divide over 24 GPUs
  EXPECT_THROW(prepare_sweep(s), InputError);
  s = spec();
  s.hardware.values = {kRoot + "/hardware/clusters/missing.yaml"};
  EXPECT_THROW(prepare_sweep(s), InputError);
}

}  // namespace
}  // namespace moesim::search
