// Unit tests of the bad-input table's pieces: the cases file, the Markdown cells, the generated
// part of the doc.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "bad_input_table.h"

namespace {

using namespace moesim::docs_test;

TEST(BadInputTableFormat, CasesAreReadBySection) {
  const std::vector<BadInputSection> sections = read_bad_inputs(
      "# a comment\n"
      "## Flags\n"
      "moesim simulate --seed -1\n"
      "\n"
      "## Files\n"
      "# another comment\n"
      "moesim graph check x.json\n"
      "moesim frobnicate\n");
  ASSERT_EQ(sections.size(), 2u);
  EXPECT_EQ(sections[0].title, "Flags");
  ASSERT_EQ(sections[0].cases.size(), 1u);
  EXPECT_EQ(sections[0].cases[0].line, 3);
  EXPECT_EQ(sections[0].cases[0].command, "moesim simulate --seed -1");
  ASSERT_EQ(sections[1].cases.size(), 2u);
  EXPECT_EQ(sections[1].cases[1].line, 8);
  EXPECT_THROW(read_bad_inputs("moesim frobnicate\n"), std::runtime_error);
}

TEST(BadInputTableFormat, CellsAreCodeSpansThatKeepTheTableWhole) {
  EXPECT_EQ(table_code_cell("error: --op a|b"), "`error: --op a\\|b`");
  EXPECT_EQ(table_code_cell("see `moesim presets`"), "`` see `moesim presets` ``");
  EXPECT_EQ(table_code_cell("a ``b`` c"), "```a ``b`` c```");
}

TEST(BadInputTableFormat, ASectionIsATitleAndATable) {
  EXPECT_EQ(table_section("Flags", {{"moesim x", 2, "error: y"}}),
            "## Flags\n\n| input | exit code | message (first line) |\n|---|---|---|\n| `moesim x` | 2 | `error: y` |\n");
}

TEST(BadInputTableFormat, OnlyTheGeneratedPartOfTheDocIsReplaced) {
  const std::string doc = std::string("# Title\n\nprose\n") + kGeneratedBegin + " by a test -->\nold\ntable\n" +
                          kGeneratedEnd + "\nafter\n";
  const GeneratedPart part = generated_part(doc);
  EXPECT_EQ(part.text, "old\ntable\n");
  EXPECT_EQ(part.first_line, 5);
  EXPECT_EQ(with_generated_part(doc, "new\n"),
            std::string("# Title\n\nprose\n") + kGeneratedBegin + " by a test -->\nnew\n" + kGeneratedEnd + "\nafter\n");
  EXPECT_THROW(generated_part("# no markers\n"), std::runtime_error);
}

}  // namespace
