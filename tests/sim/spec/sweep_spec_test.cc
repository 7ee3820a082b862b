// Tests of the sweep file loader's layout keys: the tp axis, the token axis in either unit (tokens
// or global_tokens, exactly one), and the sweep-wide drop_duplicate_tokens, grad_sync and
// zero_stage, with file:line:col on every bad value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/spec/sweep_spec.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::input_error_of;
using testing::replaced;
using testing::TempFiles;

const std::string kSourceDir = MOESIM_SOURCE_DIR;

// Line numbers below are the lines of this text (1-based); the file sits in a temporary folder,
// so its preset paths are absolute.
std::string grid() {
  return "schema_version: 1\n"                                                          // 1
         "kind: sweep\n"                                                                // 2
         "models: [" + kSourceDir + "/models/moe-gpt-s-64e.yaml]\n"                      // 3
         "hardware: [" + kSourceDir + "/hardware/clusters/adira-8x-dgx-a100.yaml]\n"     // 4
         "global_tokens: [262144, 524288]\n"                                            // 5
         "tp: [1, 2, 8]\n"                                                              // 6
         "chunks: [1, 2]\n"                                                             // 7
         "strategies: [none]\n"                                                         // 8
         "grad_sync: true\n"                                                            // 9
         "zero_stage: 1\n"                                                              // 10
         "drop_duplicate_tokens: false\n";                                              // 11
}

TEST(SweepSpecTest, LayoutKeysAndTheGlobalTokenAxis) {
  TempFiles files;
  const SweepSpec s = load_sweep_spec(files.write("g.yaml", grid()));
  EXPECT_EQ(s.token_unit, TokenUnit::kGlobal);
  EXPECT_STREQ(s.token_key(), "global_tokens");
  EXPECT_EQ(s.tokens.values, (std::vector<std::int64_t>{262144, 524288}));
  EXPECT_EQ(s.tokens.where.line, 5);
  EXPECT_EQ(s.tp.values, (std::vector<int>{1, 2, 8}));
  EXPECT_EQ(s.tp.where.line, 6);
  EXPECT_TRUE(s.fixed.grad_sync);
  EXPECT_EQ(s.fixed.zero_stage, 1);
  EXPECT_FALSE(s.fixed.drop_duplicate_tokens);
}

TEST(SweepSpecTest, DefaultsArePerGpuTokensAndNoTensorParallelism) {
  TempFiles files;
  std::string text = replaced(grid(), "global_tokens: [262144, 524288]\n", "tokens: [4096]\n");
  text = replaced(text, "tp: [1, 2, 8]\n", "");
  text = text.substr(0, text.find("grad_sync"));
  const SweepSpec s = load_sweep_spec(files.write("g.yaml", text));
  EXPECT_EQ(s.token_unit, TokenUnit::kPerGpu);
  EXPECT_STREQ(s.token_key(), "tokens");
  EXPECT_EQ(s.tokens.values, (std::vector<std::int64_t>{4096}));
  EXPECT_EQ(s.tp.values, (std::vector<int>{1}));
  EXPECT_FALSE(s.fixed.grad_sync);
  EXPECT_EQ(s.fixed.zero_stage, 0);
  EXPECT_TRUE(s.fixed.drop_duplicate_tokens);
}

TEST(SweepSpecTest, BadLayoutKeysNameTheirLine) {
  TempFiles files;
  const std::string path = files.path("g.yaml");
  const auto error_of = [&](const std::string& text) {
    files.write("g.yaml", text);
    return input_error_of([&] { load_sweep_spec(path); });
  };
  // Both token keys: which one the grid means would be a guess.
  EXPECT_THAT(error_of(replaced(grid(), "tp:", "tokens: [4096]\ntp:")),
              StartsWith(path + ":5:16: global_tokens: give either tokens (per GPU) or global_tokens"));
  EXPECT_THAT(error_of(replaced(grid(), "global_tokens: [262144, 524288]\n", "")),
              AllOf(StartsWith(path + ":1:1: "), HasSubstr("missing required key 'tokens' (tokens per GPU) or "
                                                           "'global_tokens'")));
  EXPECT_THAT(error_of(replaced(grid(), "global_tokens: [262144, 524288]", "global_tokens: []")),
              StartsWith(path + ":5:16: "));
  EXPECT_THAT(error_of(replaced(grid(), "global_tokens: [262144, 524288]", "global_tokens: [0]")),
              StartsWith(path + ":5:17: "));
  EXPECT_THAT(error_of(replaced(grid(), "tp: [1, 2, 8]", "tp: [1, 0]")), StartsWith(path + ":6:9: "));
  EXPECT_THAT(error_of(replaced(grid(), "tp: [1, 2, 8]", "tp: []")),
              StartsWith(path + ":6:5: tp: the axis 'tp' is empty"));
  EXPECT_THAT(error_of(replaced(grid(), "zero_stage: 1", "zero_stage: 2")), StartsWith(path + ":10:13: "));
  EXPECT_THAT(error_of(replaced(grid(), "grad_sync: true", "grad_sync: maybe")), StartsWith(path + ":9:12: "));
  EXPECT_THAT(error_of(replaced(grid(), "drop_duplicate_tokens: false", "drop_duplicate_tokens: 2")),
              StartsWith(path + ":11:24: "));
}

}  // namespace
}  // namespace moesim
