// Tests of the run options' table (sim/spec/run_options.h): every option reads the same value from
// a run file and from its flag's text, spells it back, refuses a bad value with one message
// whichever way it came, and docs/config-reference.md shows the table as it is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "sim/spec/loader.h"
#include "sim/spec/run_options.h"
#include "sim/spec/sweep_spec.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using testing::input_error_of;

// A value of the option other than its default, spelled as a file and a flag take it.
std::string other_value(const RunOption& o) {
  const std::string def = o.text(RunSpec{});
  switch (o.type) {
    case RunOptionType::kInteger:
      return std::to_string(std::to_string(o.min) == def ? o.max : o.min);
    case RunOptionType::kBool:
      return def == "true" ? "false" : "true";
    case RunOptionType::kChoice:
      for (const std::string& c : o.choices())
        if (c != def) return c;
      break;
    case RunOptionType::kRouting:
      return "zipf:1.5";
  }
  ADD_FAILURE() << o.key << " takes one value only";
  return def;
}

TEST(RunOptionsTest, KeysAndFlagsAreUnique) {
  std::set<std::string> keys;
  std::set<std::string> flags;
  for (const RunOption& o : run_options()) {
    EXPECT_TRUE(keys.insert(o.key).second) << o.key;
    EXPECT_TRUE(flags.insert(o.flag).second) << o.flag;
    EXPECT_EQ(std::string(o.flag).rfind("--", 0), 0u) << o.key;
    EXPECT_FALSE(std::string(o.rule).empty()) << o.key;
    EXPECT_FALSE(std::string(o.help).empty()) << o.key;
  }
  EXPECT_EQ(keys.size(), 20u);
}

TEST(RunOptionsTest, DefaultsAreRunSpecsAndSpellBack) {
  for (const RunOption& o : run_options()) {
    if (o.required) continue;  // no default: RunSpec's 0 is outside the range
    RunSpec run;
    const std::string def = o.text(run);
    o.set_from_flag(run, def);
    EXPECT_EQ(o.text(run), def) << o.key;
  }
}

TEST(RunOptionsTest, FileAndFlagGiveTheSameRun) {
  for (const RunOption& o : run_options()) {
    const std::string value = other_value(o);
    RunSpec from_flag;
    o.set_from_flag(from_flag, value);
    EXPECT_EQ(o.text(from_flag), value) << o.key;
    EXPECT_NE(o.text(from_flag), o.text(RunSpec{})) << o.key;
    std::string text = "schema_version: 1\nkind: run\n";
    if (!o.required) text += "tokens_per_gpu: 8\n";
    text += std::string(o.key) + ": " + value + "\n";
    const RunFile file = parse_run_spec(text, "/tmp/run.yaml");
    EXPECT_EQ(o.text(file.run), value) << o.key;
    // The other options keep their defaults.
    for (const RunOption& other : run_options()) {
      if (std::string(other.key) == o.key || std::string(other.key) == "tokens_per_gpu") continue;
      EXPECT_EQ(other.text(file.run), other.text(RunSpec{})) << o.key << " moved " << other.key;
    }
  }
}

TEST(RunOptionsTest, OneMessagePerRuleFromFileOrFlag) {
  const RunOption& slots = run_option("slots");
  RunSpec run;
  EXPECT_EQ(input_error_of([&] { slots.set_from_flag(run, "3"); }), "--slots: must be in [1, 2], found 3");
  // A file without a name still says the key's rule, not the flag's.
  EXPECT_THAT(input_error_of([] { parse_run_spec("schema_version: 1\nkind: run\ntokens_per_gpu: 8\nslots: 3\n", ""); }),
              HasSubstr("slots: must be in [1, 2], found 3"));
  const RunOption& order = run_option("order");
  EXPECT_EQ(input_error_of([&] { order.set_from_flag(run, "fifo"); }),
            "--order: unknown value 'fifo'; valid values: sequential, mpipemoe, fastermoe, tutel");
  const std::string in_file = input_error_of([] {
    parse_run_spec("schema_version: 1\nkind: run\ntokens_per_gpu: 8\norder: fifo\n", "/tmp/run.yaml");
  });
  EXPECT_THAT(in_file, HasSubstr("/tmp/run.yaml:4:8: order: unknown value 'fifo'; valid values: sequential, "
                                 "mpipemoe, fastermoe, tutel"));
  EXPECT_THAT(input_error_of([&] { run_option("seed").set_from_flag(run, "1e3"); }),
              HasSubstr("--seed: expected an integer, found '1e3'"));
  EXPECT_THAT(input_error_of([&] { run_option("routing").set_from_flag(run, "zipf:-1"); }),
              HasSubstr("--routing: "));
  EXPECT_EQ(run.slots, RunSpec{}.slots);  // a refused value leaves the run as it was
}

TEST(RunOptionsTest, SweepFixedKeysAreRunOptions) {
  for (const std::string& key : sweep_fixed_keys()) EXPECT_EQ(run_option(key).key, key);
}

TEST(RunOptionsTest, ConfigReferenceShowsTheTable) {
  std::ifstream in(std::string(MOESIM_SOURCE_DIR) + "/docs/config-reference.md");
  std::stringstream doc;
  doc << in.rdbuf();
  EXPECT_THAT(doc.str(), HasSubstr(run_options_markdown()))
      << "regenerate docs/config-reference.md's run-file table with `moesim options run --markdown`";
}

}  // namespace
}  // namespace moesim
