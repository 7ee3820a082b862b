// Writing a command's outputs: files, or stdout for "-".
//
// A bad output path must not cost a long simulation: check_outputs runs before a command does any
// work and refuses a path that cannot be written (a missing folder, a file where a folder should
// be, a read-only folder, a folder where the file should be), two outputs on stdout, and two
// outputs naming the same file. A file is then written beside its target under a temporary name
// and renamed over it once complete (PendingFile), so a failure leaves neither a partial file nor
// a stray temporary one, and an existing target stays as it was. Devices and pipes (/dev/null,
// /dev/stdout) are written in place: they cannot be renamed over.
#pragma once

#include <string>
#include <vector>

namespace moesim::cli {

// One output of a command: the flag that names it and its path ("" = not asked for, "-" = stdout).
struct Output {
  std::string flag;
  std::string path;
};

// Throws InputError, naming the flag(s) and the path, when an output cannot be written or two
// outputs collide. Leaves no file behind: writability is probed with a temporary file, removed.
void check_outputs(const std::vector<Output>& outputs);

// Writes `text` as the output `flag` names; InputError naming the flag when that fails.
void write_output(const std::string& flag, const std::string& path, const std::string& text);

// A file being written: the text goes to a temporary file in the target's folder, which becomes
// the target on commit(); destroyed without commit() (an exception on the way), it is removed.
class PendingFile {
 public:
  PendingFile(std::string flag, std::string target, const std::string& text);
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

  // The temporary file, complete: to read it back before committing it.
  const std::string& temp_path() const { return temp_; }
  // Renames it over the target.
  void commit();
  // Renames it to `other` instead (in the same folder), e.g. to keep a rejected file for a look.
  void keep_as(const std::string& other);

 private:
  void rename_to(const std::string& path);

  std::string flag_;
  std::string path_;    // as the user gave it, for messages
  std::string target_;  // a symbolic link's target: the link stays a link
  std::string temp_;
  bool done_ = false;
};

}  // namespace moesim::cli
