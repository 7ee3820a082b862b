// A scratch folder that looks like the repository to a command run in it: the data folders are
// links to the source tree's (models/, hardware/, examples/, validate/, tests/, docs/), so the docs'
// commands find their inputs, while what they write (`--json report.json`) lands in the scratch
// folder, never in the source tree. Commands run through /bin/sh with the moesim under test first
// on PATH.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "../cli/cli_fixture.h"

namespace moesim::docs_test {

namespace fs = std::filesystem;

// The exit code (-1: killed by a signal), stdout and stderr of a command.
using CommandResult = cli_test::Result;
using cli_test::read_file;

class Workspace {
 public:
  // `name` tells the workspaces of one test run apart (and shows in failures).
  explicit Workspace(const std::string& name);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Runs `command` with sh in the scratch folder. `environment` is set (an empty value unsets the
  // variable); LC_ALL is C.
  CommandResult run(const std::string& command,
                    const std::vector<std::pair<std::string, std::string>>& environment) const;

  const fs::path& folder() const { return work_; }

 private:
  fs::path root_;  // work_ and the command's script and captured output
  fs::path work_;
};

// `text` quoted for sh.
std::string shell_quote(const std::string& text);

}  // namespace moesim::docs_test
