#include "output_diff.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>

namespace moesim::docs_test {
namespace {

constexpr std::size_t kMaxDiffLines = 150;
constexpr std::size_t kListedElided = 3;
constexpr std::size_t kContext = 3;

std::string without_trailing_blanks(std::string s) {
  s.erase(s.find_last_not_of(" \t") + 1);
  return s;
}

// The cheapest alignment of the doc's lines with the printed ones, by dynamic programming:
// cost(i, j) aligns the doc's lines from i with the printed ones from j. A doc line missing, a
// printed line extra, or a doc line changed into a printed one costs one edit, kEdit, more than an
// elision covering every printed line (1 per line), so the outputs are the same exactly when the
// cost is below kEdit; among alignments with the fewest edits, elisions cover as little as they
// can, which keeps a changed line next to an elision visible as a change.
class Alignment {
 public:
  Alignment(const std::vector<DocLine>& doc, const std::vector<std::string>& printed)
      : doc_(doc),
        printed_(printed),
        edit_(static_cast<std::int64_t>(printed.size()) + 1),
        width_(printed.size() + 1),
        cost_((doc.size() + 1) * width_, 0) {
    for (DocLine& d : doc_) d.text = without_trailing_blanks(d.text);
    for (std::string& p : printed_) p = without_trailing_blanks(p);
    fill();
  }

  bool same() const { return cost(0, 0) < edit_; }

  // The alignment as lines: `  ` kept, `- ` a doc line not printed, `+ ` a printed line the doc
  // does not show, `  ...` an elision and `  . ` the last lines it covered.
  std::vector<std::string> diff_lines() const {
    std::vector<std::string> lines;
    std::size_t i = 0, j = 0, elided_from = 0;
    while (i < doc_.size() || j < printed_.size()) {
      const bool more_doc = i < doc_.size(), more_printed = j < printed_.size();
      if (more_doc && elision(i)) {
        if (more_printed && cost(i, j) == 1 + cost(i, j + 1) && cost(i, j) != cost(i + 1, j)) {
          ++j;
          continue;
        }
        // The last lines an elision covers: the context of a difference right after it.
        const std::size_t elided = j - elided_from, listed = std::min(elided, kListedElided);
        lines.push_back("  ...  (" + std::to_string(elided) + " printed line(s)" +
                        (elided > listed ? ", the last " + std::to_string(listed) + " below" : "") + ")");
        for (std::size_t k = j - listed; k < j; ++k) lines.push_back("  . " + printed_[k]);
        ++i;
      } else if (more_doc && more_printed && step(i, j) == 0 && cost(i, j) == cost(i + 1, j + 1)) {
        lines.push_back("  " + printed_[j]), ++i, ++j;
      } else if (more_doc && cost(i, j) == edit_ + cost(i + 1, j)) {
        lines.push_back(doc_line(i)), ++i;
      } else if (more_printed && cost(i, j) == edit_ + cost(i, j + 1)) {
        lines.push_back("+ " + printed_[j]), ++j;
      } else {  // a changed line
        lines.push_back(doc_line(i)), lines.push_back("+ " + printed_[j]), ++i, ++j;
      }
      elided_from = j;
    }
    return lines;
  }

 private:
  std::int64_t cost(std::size_t i, std::size_t j) const { return cost_[i * width_ + j]; }
  std::int64_t& cost(std::size_t i, std::size_t j) { return cost_[i * width_ + j]; }
  bool elision(std::size_t i) const { return doc_[i].text == kElision; }
  // Doc line i against printed line j: kept, or changed.
  std::int64_t step(std::size_t i, std::size_t j) const { return doc_[i].text == printed_[j] ? 0 : edit_; }
  std::string doc_line(std::size_t i) const {
    return "- " + doc_[i].text + "    <- doc line " + std::to_string(doc_[i].number);
  }

  void fill() {
    const std::size_t rows = doc_.size(), cols = printed_.size();
    for (std::size_t j = 0; j <= cols; ++j) cost(rows, j) = static_cast<std::int64_t>(cols - j) * edit_;
    for (std::size_t i = rows; i-- > 0;) {
      for (std::size_t j = cols + 1; j-- > 0;) {
        const bool more_printed = j < cols;
        if (elision(i)) {
          const std::int64_t cover = more_printed ? 1 + cost(i, j + 1) : std::numeric_limits<std::int64_t>::max();
          cost(i, j) = std::min(cost(i + 1, j), cover);
          continue;
        }
        std::int64_t best = edit_ + cost(i + 1, j);
        if (more_printed) best = std::min({best, edit_ + cost(i, j + 1), step(i, j) + cost(i + 1, j + 1)});
        cost(i, j) = best;
      }
    }
  }

  std::vector<DocLine> doc_;
  std::vector<std::string> printed_;
  std::int64_t edit_;
  std::size_t width_;
  std::vector<std::int64_t> cost_;
};

bool is_change(const std::string& line) { return line.starts_with("- ") || line.starts_with("+ "); }

// The diff's changes with kContext lines around each; longer runs of context are counted.
std::string with_context(const std::vector<std::string>& lines) {
  std::vector<bool> keep(lines.size(), false);
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (!is_change(lines[k])) continue;
    const std::size_t from = k < kContext ? 0 : k - kContext, to = std::min(lines.size(), k + kContext + 1);
    std::fill(keep.begin() + static_cast<std::ptrdiff_t>(from), keep.begin() + static_cast<std::ptrdiff_t>(to), true);
  }
  for (std::size_t k = 0; k < lines.size(); ++k)  // a count would take the line's own place
    if (!keep[k] && (k == 0 || keep[k - 1]) && (k + 1 == lines.size() || keep[k + 1])) keep[k] = true;
  std::ostringstream out;
  std::size_t shown = 0, skipped = 0;
  for (std::size_t k = 0; k <= lines.size(); ++k) {
    if (k < lines.size() && !keep[k]) {
      ++skipped;
      continue;
    }
    if (skipped > 0 && shown++ < kMaxDiffLines) out << "  (" << skipped << " line(s) alike)\n";
    skipped = 0;
    if (k < lines.size() && shown++ < kMaxDiffLines) out << lines[k] << "\n";
  }
  if (shown > kMaxDiffLines) out << "(" << shown - kMaxDiffLines << " more diff line(s) not shown)\n";
  return out.str();
}

}  // namespace

std::vector<std::string> output_lines(const std::string& printed) {
  std::vector<std::string> lines;
  std::istringstream in(printed);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

OutputComparison compare_output(const std::vector<DocLine>& expected, const std::string& printed) {
  const Alignment alignment(expected, output_lines(printed));
  if (alignment.same()) return {true, ""};
  return {false, with_context(alignment.diff_lines())};
}

}  // namespace moesim::docs_test
