// docs/bad-input.md's table: each bad input of tests/docs/bad_inputs/cases.txt with moesim's exit
// code and the first line of its message. The test runs the cases and compares the table it makes
// with the doc's; MOESIM_REGENERATE_DOCS=1 (tests/docs/regenerate_bad_input_table.sh) rewrites it.
#pragma once

#include <string>
#include <vector>

namespace moesim::docs_test {

struct BadInput {
  int line = 0;         // of cases.txt
  std::string command;  // as the table shows it and sh runs it
};

struct BadInputSection {
  std::string title;
  std::vector<BadInput> cases;
};

// cases.txt: `## Title` starts a section, `#` lines are comments, blank lines are skipped, every
// other line is one case.
std::vector<BadInputSection> read_bad_inputs(const std::string& text);

struct BadInputRow {
  std::string command;
  int exit_code = 0;
  std::string message;  // the first line of stderr
};

// One Markdown section: `## title` and its table.
std::string table_section(const std::string& title, const std::vector<BadInputRow>& rows);

// `text` as a Markdown code span in a table cell: a fence longer than any run of backticks in it,
// and `|` escaped so the cell does not end there.
std::string table_code_cell(const std::string& text);

// The part of the doc between the two markers below (from the line after the first), and the line
// it starts on; the doc with that part replaced. A doc without the markers is an error.
inline constexpr const char* kGeneratedBegin = "<!-- the table below is generated";
inline constexpr const char* kGeneratedEnd = "<!-- end of the generated table -->";
struct GeneratedPart {
  std::string text;
  int first_line = 0;
};
GeneratedPart generated_part(const std::string& doc);
std::string with_generated_part(const std::string& doc, const std::string& part);

}  // namespace moesim::docs_test
