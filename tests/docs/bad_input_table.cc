#include "bad_input_table.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace moesim::docs_test {
namespace {

// Where the generated part of the doc starts (after the begin marker's line) and ends.
std::pair<std::size_t, std::size_t> generated_bounds(const std::string& doc) {
  const std::size_t begin = doc.find(kGeneratedBegin);
  const std::size_t end = doc.find(kGeneratedEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin)
    throw std::runtime_error(std::string("the doc lacks the markers '") + kGeneratedBegin + "...' and '" +
                             kGeneratedEnd + "' around its generated table");
  const std::size_t after_begin = doc.find('\n', begin);
  if (after_begin == std::string::npos || after_begin > end)
    throw std::runtime_error("the generated table's begin marker must end its line");
  return {after_begin + 1, end};
}

}  // namespace

std::vector<BadInputSection> read_bad_inputs(const std::string& text) {
  std::vector<BadInputSection> sections;
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.starts_with("## ")) {
      sections.push_back({line.substr(3), {}});
    } else if (!line.empty() && !line.starts_with("#")) {
      if (sections.empty()) throw std::runtime_error("cases.txt:" + std::to_string(number) + ": a case before any '## ' section");
      sections.back().cases.push_back({number, line});
    }
  }
  return sections;
}

std::string table_code_cell(const std::string& text) {
  std::size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
  std::string escaped;
  for (char c : text) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return fence + (pad ? " " : "") + escaped + (pad ? " " : "") + fence;
}

std::string table_section(const std::string& title, const std::vector<BadInputRow>& rows) {
  std::string out = "## " + title + "\n\n| input | exit code | message (first line) |\n|---|---|---|\n";
  for (const BadInputRow& r : rows)
    out += "| " + table_code_cell(r.command) + " | " + std::to_string(r.exit_code) + " | " +
           table_code_cell(r.message) + " |\n";
  return out;
}

GeneratedPart generated_part(const std::string& doc) {
  const auto [begin, end] = generated_bounds(doc);
  const auto lines_before = std::count(doc.begin(), doc.begin() + static_cast<std::ptrdiff_t>(begin), '\n');
  return {doc.substr(begin, end - begin), static_cast<int>(lines_before) + 1};
}

std::string with_generated_part(const std::string& doc, const std::string& part) {
  const auto [begin, end] = generated_bounds(doc);
  return doc.substr(0, begin) + part + doc.substr(end);
}

}  // namespace moesim::docs_test
