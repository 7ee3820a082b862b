// Every Markdown file of the source tree, against the moesim it documents (docs/writing-docs.md):
// each `$ ` command of a ```console block runs in a scratch copy of the
// repository's data folders and must exit 0 printing what the doc shows; a concrete moesim command
// in any other fenced block is reported with its file and line.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "doc_examples.h"
#include "output_diff.h"
#include "workspace.h"

namespace {

using namespace moesim::docs_test;

// Folders of the source tree that hold no documentation: build output and hidden folders.
bool skipped_folder(const fs::path& folder) {
  const std::string name = folder.filename().string();
  return name.starts_with(".") || name.starts_with("build") || name == "dist" || name == "out" || name == "_deps";
}

// The Markdown files, relative to the source tree, in order.
std::vector<std::string> markdown_files() {
  const fs::path root(MOESIM_SOURCE_DIR);
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && skipped_folder(it->path())) {
      it.disable_recursion_pending();
    } else if (it->is_regular_file() && it->path().extension() == ".md") {
      files.push_back(fs::relative(it->path(), root).string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// What a terminal shows when the streams do not interleave: stdout, then stderr.
std::string printed(const CommandResult& r) {
  const bool needs_newline = !r.out.empty() && r.out.back() != '\n';
  return r.out + (needs_newline ? "\n" : "") + r.err;
}

void check_example(const std::string& where, const Example& example, const Workspace& workspace) {
  // MOESIM_DATA_DIR unset: presets come from the source tree the binary was built from.
  const CommandResult r = workspace.run(command_to_run(example.command), {{"MOESIM_DATA_DIR", ""}});
  if (r.exit_code != 0) {
    ADD_FAILURE() << where << ": `" << example.command << "` exited " << r.exit_code << " (an example must exit 0):\n"
                  << printed(r);
    return;
  }
  const OutputComparison c = compare_output(example.expected, printed(r));
  if (!c.same)
    ADD_FAILURE() << where << ": `" << example.command
                  << "` prints other than the doc shows (stdout then stderr; numbers exactly; `...` elides lines). "
                     "- the doc's line, + what moesim printed:\n"
                  << c.diff;
}

class DocFile : public ::testing::TestWithParam<std::string> {
 protected:
  DocExamples examples() const { return read_examples(read_file(fs::path(MOESIM_SOURCE_DIR) / GetParam())); }
};

TEST_P(DocFile, EveryConcreteCommandIsAConsoleExample) {
  for (const std::string& problem : examples().problems) ADD_FAILURE() << GetParam() << ":" << problem;
}

TEST_P(DocFile, ExamplesPrintWhatTheDocShows) {
  const DocExamples doc = examples();
  const Workspace workspace(GetParam());
  int run = 0, shown_only = 0;
  for (const ConsoleBlock& block : doc.blocks) {
    if (!block.skip_reason.empty()) {
      std::cout << GetParam() << ":" << block.fence_line << ": " << block.examples.size()
                << " command(s) not run: the block " << block.skip_reason << "\n";
      shown_only += static_cast<int>(block.examples.size());
      continue;
    }
    for (const Example& example : block.examples) {
      check_example(GetParam() + ":" + std::to_string(example.line), example, workspace);
      ++run;
    }
  }
  std::cout << GetParam() << ": " << run << " example(s) run, " << shown_only << " shown only\n";
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name;
  for (char c : info.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Docs, DocFile, ::testing::ValuesIn(markdown_files()), test_name);

}  // namespace
