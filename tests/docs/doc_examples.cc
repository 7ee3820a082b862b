#include "doc_examples.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <sstream>
#include <string_view>

namespace moesim::docs_test {
namespace {

// The tags a console block may carry after `console`, each naming what its commands need that a
// build machine lacks: such commands are shown to the reader, not run.
struct SkipTag {
  std::string_view tag;
  std::string_view reason;
};
constexpr SkipTag kSkipTags[] = {
    {"gpu", "needs a GPU with moesim's GPU runtime, or files measured on one"},
    {"cluster", "reads nccl-tests logs measured on a GPU cluster"},
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::string trim(std::string_view s) {
  const std::size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  return std::string(s.substr(begin, s.find_last_not_of(" \t") - begin + 1));
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool continues(const std::string& line) { return !line.empty() && line.back() == '\\'; }

std::string basename_of(const std::string& word) {
  const std::size_t slash = word.rfind('/');
  return slash == std::string::npos ? word : word.substr(slash + 1);
}

// NAME=value before a command: the shell's environment assignment.
bool is_assignment(const std::string& word) {
  const std::size_t eq = word.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  for (std::size_t i = 0; i < eq; ++i) {
    const char c = word[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return !std::isdigit(static_cast<unsigned char>(word[0]));
}

// A command's words as the shell would split them for our purpose: no line continuations, nothing
// from a comment on.
std::vector<std::string> command_words(const std::string& command) {
  std::vector<std::string> words;
  for (const std::string& w : split_words(command)) {
    if (w.front() == '#') break;
    if (w != "\\") words.push_back(w);
  }
  return words;
}

// The index of the word that names the program (past environment assignments and `env`).
std::size_t program_word(const std::vector<std::string>& words) {
  std::size_t i = 0;
  while (i < words.size() && (is_assignment(words[i]) || words[i] == "env")) ++i;
  return i;
}

bool is_launcher(const std::string& program) {
  return program == "mpirun" || program == "mpiexec" || program == "srun";
}

bool is_placeholder(const std::string& word) {
  if (word.find_first_of("[]") != std::string::npos || word.find("...") != std::string::npos) return true;
  if (word.find('|') != std::string::npos && word != "|" && word != "||") return true;  // a|b, not a pipe
  const std::size_t angle = word.find('<');
  if (angle != std::string::npos && angle + 1 < word.size() && std::isalpha(static_cast<unsigned char>(word[angle + 1])))
    return true;  // <file>, matrix:<csv, not a redirection
  const std::size_t eq = word.find('=');
  const std::string value = eq == std::string::npos ? word : word.substr(eq + 1);
  if (value.empty() || !std::isupper(static_cast<unsigned char>(value[0]))) return false;
  for (char c : value)
    if (!(std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;  // FILE, N, CLUSTER
}

struct Fence {
  std::size_t indent = 0;
  char mark = '`';
  std::size_t length = 0;
  std::string info;
};

std::optional<Fence> fence_of(const std::string& line) {
  const std::size_t indent = line.find_first_not_of(' ');
  if (indent == std::string::npos || (line[indent] != '`' && line[indent] != '~')) return std::nullopt;
  const char mark = line[indent];
  std::size_t end = line.find_first_not_of(mark, indent);
  if (end == std::string::npos) end = line.size();
  if (end - indent < 3) return std::nullopt;
  return Fence{indent, mark, end - indent, trim(std::string_view(line).substr(end))};
}

std::string strip_indent(const std::string& line, std::size_t indent) {
  const std::size_t spaces = std::min(indent, line.find_first_not_of(' ') == std::string::npos
                                                  ? line.size()
                                                  : line.find_first_not_of(' '));
  return line.substr(spaces);
}

std::string at(int line, const std::string& what) { return std::to_string(line) + ": " + what; }

// The block's lines joined where one ends in a backslash, each with the line it starts on.
std::vector<DocLine> logical_lines(const std::vector<DocLine>& lines) {
  std::vector<DocLine> joined;
  bool continued = false;
  for (const DocLine& l : lines) {
    if (continued)
      joined.back().text += "\n" + l.text;
    else
      joined.push_back(l);
    continued = continues(l.text);
  }
  return joined;
}

ConsoleBlock console_block(const FencedBlock& block, std::string skip_reason, std::vector<std::string>& problems) {
  ConsoleBlock console{block.fence_line, std::move(skip_reason), {}};
  bool continued = false;
  for (const DocLine& l : block.lines) {
    if (continued) {
      console.examples.back().command += "\n" + l.text;
    } else if (l.text.starts_with("$ ")) {
      console.examples.push_back({l.number, l.text.substr(2), {}});
    } else if (console.examples.empty()) {
      problems.push_back(at(l.number, "output before the console block's first `$ ` command"));
    } else {
      console.examples.back().expected.push_back(l);
    }
    continued = (continued || l.text.starts_with("$ ")) && continues(l.text);
  }
  if (console.examples.empty()) problems.push_back(at(block.fence_line, "a console block without a `$ ` command"));
  return console;
}

// The skip reason of a console block's tags (empty: its commands run); an unknown tag is a problem.
std::string skip_reason_of(const FencedBlock& block, const std::vector<std::string>& tags,
                           std::vector<std::string>& problems) {
  std::string reason;
  for (const std::string& tag : tags) {
    bool known = false;
    for (const SkipTag& t : kSkipTags) {
      if (tag != t.tag) continue;
      known = true;
      reason += (reason.empty() ? "" : "; ") + std::string(t.reason);
    }
    if (!known) problems.push_back(at(block.fence_line, "unknown console tag '" + tag + "'; known: gpu, cluster"));
  }
  return reason;
}

void report_unchecked_commands(const FencedBlock& block, std::vector<std::string>& problems) {
  for (const DocLine& l : logical_lines(block.lines)) {
    if (!runs_moesim(l.text) || is_synopsis(l.text)) continue;
    problems.push_back(at(l.number, "`" + l.text.substr(0, l.text.find('\n')) +
                                        "` is a concrete moesim command outside a console block: show it as "
                                        "`$ ` with its output in a ```console block (tag `gpu` or `cluster` if "
                                        "it cannot run on a build machine), or write a synopsis"));
  }
}

}  // namespace

std::vector<FencedBlock> fenced_blocks(const std::string& markdown, std::vector<std::string>& problems) {
  const std::vector<std::string> lines = split_lines(markdown);
  std::vector<FencedBlock> blocks;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::optional<Fence> open = fence_of(lines[i]);
    if (!open) continue;
    FencedBlock block{static_cast<int>(i + 1), open->info, {}};
    std::size_t j = i + 1;
    for (; j < lines.size(); ++j) {
      const std::optional<Fence> close = fence_of(lines[j]);
      if (close && close->mark == open->mark && close->length >= open->length && close->info.empty()) break;
      block.lines.push_back({static_cast<int>(j + 1), strip_indent(lines[j], open->indent)});
    }
    if (j == lines.size()) problems.push_back(at(block.fence_line, "the fenced block is not closed"));
    blocks.push_back(std::move(block));
    i = j;
  }
  return blocks;
}

DocExamples read_examples(const std::string& markdown) {
  DocExamples doc;
  for (const FencedBlock& block : fenced_blocks(markdown, doc.problems)) {
    std::vector<std::string> info = split_words(block.info);
    if (info.empty() || info.front() != "console") {
      report_unchecked_commands(block, doc.problems);
      continue;
    }
    info.erase(info.begin());
    doc.blocks.push_back(console_block(block, skip_reason_of(block, info, doc.problems), doc.problems));
  }
  return doc;
}

bool runs_moesim(const std::string& command) {
  const std::vector<std::string> words = command_words(command);
  const std::size_t program = program_word(words);
  if (program == words.size()) return false;
  if (basename_of(words[program]) == "moesim") return true;
  if (!is_launcher(basename_of(words[program]))) return false;
  for (std::size_t i = program + 1; i < words.size(); ++i)
    if (basename_of(words[i]) == "moesim") return true;
  return false;
}

bool is_synopsis(const std::string& command) {
  for (const std::string& word : command_words(command))
    if (is_placeholder(word)) return true;
  return false;
}

std::string command_to_run(const std::string& command) {
  const std::vector<std::string> words = command_words(command);
  const std::size_t program = program_word(words);
  if (program == words.size() || words[program].find('/') == std::string::npos ||
      basename_of(words[program]) != "moesim")
    return command;
  // The program word is the first occurrence of its text past the assignments before it.
  std::size_t from = 0;
  for (std::size_t i = 0; i < program; ++i) from = command.find(words[i], from) + words[i].size();
  const std::size_t pos = command.find(words[program], from);
  return command.substr(0, pos) + "moesim" + command.substr(pos + words[program].size());
}

}  // namespace moesim::docs_test
