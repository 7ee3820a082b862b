#include "workspace.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>

namespace moesim::docs_test {
namespace {

// The source tree's folders that the docs' commands read.
constexpr const char* kDataFolders[] = {"models", "hardware", "examples", "validate", "tests", "docs"};

std::string folder_name(const std::string& name) {
  std::string safe;
  for (char c : name) safe += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return safe;
}

}  // namespace

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

Workspace::Workspace(const std::string& name)
    : root_(fs::temp_directory_path() / ("moesim_docs_" + folder_name(name) + "_" + std::to_string(::getpid()))),
      work_(root_ / "work") {
  fs::remove_all(root_);
  fs::create_directories(work_);
  for (const char* folder : kDataFolders) fs::create_directory_symlink(fs::path(MOESIM_SOURCE_DIR) / folder, work_ / folder);
}

Workspace::~Workspace() {
  std::error_code ignored;
  fs::remove_all(root_, ignored);
}

CommandResult Workspace::run(const std::string& command,
                             const std::vector<std::pair<std::string, std::string>>& environment) const {
  const fs::path script = root_ / "command.sh";
  const fs::path out = root_ / "stdout";
  const fs::path err = root_ / "stderr";
  {
    std::ofstream s(script);
    s << "PATH=" << shell_quote(fs::path(MOESIM_BINARY).parent_path().string()) << ":\"$PATH\"\n"
      << "LC_ALL=C\nexport PATH LC_ALL\n";
    for (const auto& [name, value] : environment)
      s << (value.empty() ? "unset " + name : name + "=" + shell_quote(value) + "; export " + name) << "\n";
    s << command << "\n";
  }
  const std::string line = "cd " + shell_quote(work_.string()) + " && /bin/sh " + shell_quote(script.string()) +
                           " >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string()) + " </dev/null";
  const int status = std::system(line.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

}  // namespace moesim::docs_test
