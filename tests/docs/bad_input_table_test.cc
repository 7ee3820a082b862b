// docs/bad-input.md against moesim: every case of tests/docs/bad_inputs/cases.txt runs through the
// built binary and must exit 2 with an `error: ` line, and the table the answers make must be the
// doc's. MOESIM_REGENERATE_DOCS=1 writes the table into the doc instead
// (tests/docs/regenerate_bad_input_table.sh).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "bad_input_table.h"
#include "output_diff.h"
#include "workspace.h"

namespace {

using namespace moesim::docs_test;

const fs::path kSource(MOESIM_SOURCE_DIR);

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The source tree's absolute path (a reference cycle is named by canonical paths) printed as
// <source>, so that the table does not depend on where the tree is checked out.
std::string without_source_folder(std::string text) {
  const std::string source = fs::canonical(kSource).string();
  for (std::size_t at; (at = text.find(source)) != std::string::npos;) text.replace(at, source.size(), "<source>");
  return text;
}

BadInputRow answer_to(const BadInput& c, const Workspace& workspace) {
  // MOESIM_DATA_DIR=.: presets are read from the workspace's links, so their paths print relative.
  const CommandResult r = workspace.run(c.command, {{"MOESIM_DATA_DIR", "."}});
  const BadInputRow row{c.command, r.exit_code, without_source_folder(first_line(r.err))};
  EXPECT_EQ(r.exit_code, 2) << "cases.txt:" << c.line << ": `" << c.command << "` (bad input exits 2)\n" << r.err;
  EXPECT_TRUE(row.message.starts_with("error: ")) << "cases.txt:" << c.line << ": `" << c.command << "`\n" << r.err;
  return row;
}

// The generated part of the doc: each section's table, a blank line before each.
std::string answers_table(const std::vector<BadInputSection>& sections, int& cases) {
  const Workspace workspace("bad_inputs");
  std::string table;
  for (const BadInputSection& section : sections) {
    std::vector<BadInputRow> rows;
    for (const BadInput& c : section.cases) rows.push_back(answer_to(c, workspace));
    cases += static_cast<int>(rows.size());
    table += "\n" + table_section(section.title, rows);
  }
  return table + "\n";
}

std::vector<DocLine> doc_lines(const GeneratedPart& part) {
  std::vector<DocLine> lines;
  int number = part.first_line;
  for (const std::string& text : output_lines(part.text)) lines.push_back({number++, text});
  return lines;
}

TEST(BadInputTable, EveryCaseExits2AndTheDocShowsWhatMoesimAnswers) {
  int cases = 0;
  const std::string table =
      answers_table(read_bad_inputs(read_file(kSource / "tests/docs/bad_inputs/cases.txt")), cases);
  const fs::path doc_path = kSource / "docs/bad-input.md";
  const std::string doc = read_file(doc_path);
  std::cout << cases << " bad inputs\n";
  const char* regenerate = std::getenv("MOESIM_REGENERATE_DOCS");
  if (regenerate != nullptr && std::string(regenerate) == "1") {
    if (::testing::Test::HasFailure()) return;  // a case that did not exit 2 does not go into the doc
    std::ofstream(doc_path, std::ios::binary) << with_generated_part(doc, table);
    std::cout << "wrote the table into " << doc_path.string() << "\n";
    return;
  }
  const OutputComparison c = compare_output(doc_lines(generated_part(doc)), table);
  EXPECT_TRUE(c.same) << "docs/bad-input.md is not what moesim answers now (- the doc's line, + the answer's); if "
                         "the answers are right, regenerate it: tests/docs/regenerate_bad_input_table.sh BUILD_DIR\n"
                      << c.diff;
}

}  // namespace
