// Tests of the whole step's options' table (sim/spec/step_options.h): every option sets its field
// from its flag's text, a bad value is refused naming the flag and the rule, and
// docs/training-step.md shows the table as it is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "sim/spec/step_options.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using testing::input_error_of;

TEST(StepOptionsTest, FlagsAreUniqueAndDocumented) {
  std::set<std::string> flags;
  for (const StepOption& o : step_options()) {
    EXPECT_TRUE(flags.insert(o.flag).second) << o.flag;
    EXPECT_FALSE(std::string(o.rule).empty()) << o.flag;
    EXPECT_FALSE(std::string(o.help).empty()) << o.flag;
    EXPECT_FALSE(std::string(o.default_text).empty()) << o.flag;
  }
  EXPECT_EQ(flags.size(), 20u);
}

TEST(StepOptionsTest, EveryOptionSetsItsField) {
  StepSpec s;
  const auto set = [&](const char* flag, const std::string& value) { step_option(flag).set_from_flag(s, value); };
  set("--global-batch", "64");
  set("--micro-batch", "2");
  set("--seq", "4096");
  set("--pp", "4");
  set("--vpp", "2");
  set("--cp", "2");
  set("--etp", "1");
  set("--schedule", "zb-h1");
  set("--part-layers", "7,8,0");
  set("--recompute", "selective");
  set("--recompute-modules", "mlp,moe_act");
  set("--sequence-parallel", "true");
  set("--attention", "unfused");
  set("--precision", "fp8");
  set("--fp8-recipe", "delayed");
  set("--no-overlap-grad-reduce", "false");
  set("--host-launch-us", "12.5");
  set("--dispatcher", "deepep");
  set("--overlap-moe-expert-parallel-comm", "true");
  EXPECT_EQ(s.global_batch, 64);
  EXPECT_EQ(s.micro_batch, 2);
  EXPECT_EQ(s.seq, 4096);
  EXPECT_EQ(s.layout.pp, 4);
  EXPECT_EQ(s.layout.vpp, 2);
  EXPECT_EQ(s.layout.cp, 2);
  EXPECT_EQ(s.layout.etp, 1);
  EXPECT_EQ(s.schedule, PipelineSchedule::kZeroBubbleH1);
  EXPECT_EQ(s.part_layers, (std::vector<int>{7, 8, 0}));
  EXPECT_EQ(s.recompute, Recompute::kSelective);
  EXPECT_TRUE(s.recompute_modules.mlp && s.recompute_modules.moe_act && !s.recompute_modules.core_attn);
  EXPECT_TRUE(s.sequence_parallel);
  EXPECT_EQ(s.attention, AttentionKernel::kUnfused);
  EXPECT_EQ(s.gemm_precision, DType::kFp8);
  EXPECT_EQ(s.fp8_recipe, Fp8Recipe::kDelayed);
  EXPECT_FALSE(s.overlap_grad_reduce);  // the flag sets false
  EXPECT_EQ(s.host_launch_ns, std::optional<std::int64_t>(12500));
  EXPECT_EQ(s.dispatcher, TokenDispatcher::kDeepEp);
  EXPECT_TRUE(s.overlap_moe_ep_comm);
}

TEST(StepOptionsTest, ABadValueNamesTheFlagAndTheRule) {
  StepSpec s;
  EXPECT_EQ(input_error_of([&] { step_option("--pp").set_from_flag(s, "0"); }), "--pp: must be in [1, 16777216], found 0");
  EXPECT_EQ(input_error_of([&] { step_option("--schedule").set_from_flag(s, "zb"); }),
            "--schedule: unknown value 'zb'; valid values: gpipe, 1f1b, interleaved, zb-h1, dualpipe, dualpipev");
  EXPECT_EQ(input_error_of([&] { step_option("--host-launch-us").set_from_flag(s, "2000"); }),
            "--host-launch-us: must be in [0, 1000], found 2000");
  EXPECT_THAT(input_error_of([&] { step_option("--part-layers").set_from_flag(s, "4,x"); }),
              HasSubstr("--part-layers: 'x' in '4,x' is not a layer count"));
  EXPECT_THAT(input_error_of([&] { step_option("--recompute-modules").set_from_flag(s, "mlp,attn"); }),
              HasSubstr("--recompute-modules: 'attn' is not a module"));
  EXPECT_EQ(s.layout.pp, StepSpec{}.layout.pp);  // a refused value leaves the spec as it was
}

TEST(StepOptionsTest, TrainingStepDocShowsTheTable) {
  std::ifstream in(std::string(MOESIM_SOURCE_DIR) + "/docs/training-step.md");
  std::stringstream doc;
  doc << in.rdbuf();
  EXPECT_THAT(doc.str(), HasSubstr(step_options_markdown()))
      << "regenerate docs/training-step.md's flag table with `moesim options step --markdown`";
}

}  // namespace
}  // namespace moesim
