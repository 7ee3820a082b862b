// The examples of a Markdown document (the convention is docs/writing-docs.md):
// fenced blocks with the info string `console` hold commands (`$ ` lines, continued by a trailing
// backslash) each followed by the output the doc shows; a `...` line elides any number of output
// lines. Every other fenced block may hold synopses only: a concrete `moesim` command there is
// unchecked, and reported.
#pragma once

#include <string>
#include <vector>

namespace moesim::docs_test {

struct DocLine {
  int number = 0;  // 1-based line of the Markdown file
  std::string text;
};

struct FencedBlock {
  int fence_line = 0;          // the opening fence
  std::string info;            // the info string after the fence (`console`, `sh`, ...), trimmed
  std::vector<DocLine> lines;  // the content, the fence's indentation removed
};

// One `$ ` command of a console block and the output lines the doc shows after it.
struct Example {
  int line = 0;
  std::string command;  // the text after `$ `, continuation lines joined with newlines
  std::vector<DocLine> expected;
};

struct ConsoleBlock {
  int fence_line = 0;
  std::string skip_reason;  // why its commands do not run here; empty: they run
  std::vector<Example> examples;
};

struct DocExamples {
  std::vector<ConsoleBlock> blocks;
  std::vector<std::string> problems;  // "LINE: what is wrong", for the test to report
};

// The fenced blocks of a Markdown text (``` or ~~~ fences, indented ones inside list items too).
// An unclosed fence is reported in `problems`.
std::vector<FencedBlock> fenced_blocks(const std::string& markdown, std::vector<std::string>& problems);

// The console blocks of a Markdown text, and the problems of its fenced blocks: output before a
// block's first command, an unknown console tag, a concrete moesim command outside a console block.
DocExamples read_examples(const std::string& markdown);

// Whether a command line (continuations joined) runs moesim, directly, by a path ending in
// /moesim, or under an MPI launcher.
bool runs_moesim(const std::string& command);

// Whether a moesim command line is a synopsis: it holds a placeholder (`[--flag]`, `a|b`, `<x>`,
// `...`, or an upper-case word such as FILE or N).
bool is_synopsis(const std::string& command);

// The command as the test runs it: a leading path to the binary (build/sim/cli/moesim,
// dist/bin/moesim) becomes `moesim`, which the test's PATH resolves to the binary under test.
std::string command_to_run(const std::string& command);

}  // namespace moesim::docs_test
