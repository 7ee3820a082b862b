// Holds what a command printed against the output a doc shows: line by line, exactly but for
// trailing blanks, where a doc line `...` stands for any number of printed lines (none included).
#pragma once

#include <string>
#include <vector>

#include "doc_examples.h"

namespace moesim::docs_test {

inline constexpr const char* kElision = "...";

struct OutputComparison {
  bool same = false;
  // When not the same: the doc's lines and the printed ones aligned, `-` for a doc line that was
  // not printed (with its line number), `+` for a printed line the doc does not show.
  std::string diff;
};

OutputComparison compare_output(const std::vector<DocLine>& expected, const std::string& printed);

// The printed text as lines, without the newline of the last one.
std::vector<std::string> output_lines(const std::string& printed);

}  // namespace moesim::docs_test
