#include "sim/cli/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "sim/core/error.h"

namespace moesim::cli {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void cannot_write(const std::string& flag, const std::string& path, const std::string& reason) {
  throw InputError(flag + ": cannot write '" + path + "': " + reason);
}

// Where a write ends: a symbolic link's target (even one that does not exist yet), so that the
// link is not replaced by a file.
fs::path resolved(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  for (int hop = 0; hop < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hop) {
    const fs::path next = fs::read_symlink(p, ec);
    if (ec) break;
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  return p;
}

fs::path folder_of(const fs::path& file) { return file.has_parent_path() ? file.parent_path() : fs::path("."); }

// A device or pipe (/dev/null, /dev/stdout): written in place, as nothing can be renamed over it.
bool is_special(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  return fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st);
}

// Creates a new file (never an existing one: O_EXCL) in the folder of `target`, named after it so
// that a file left by a killed process says where it came from. Returns the descriptor, or -1
// with errno set.
int create_beside(const fs::path& target, std::string& temp_path) {
  std::random_device random;
  const std::string stem = "." + target.filename().string().substr(0, 100) + ".tmp-" + std::to_string(::getpid());
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_path = (folder_of(target) / (stem + "-" + std::to_string(random()))).string();
    const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;  // errno is EEXIST
}

// The folder of an output must exist; names the first part of the path that is a file instead.
void check_folder(const std::string& flag, const std::string& path, const fs::path& folder) {
  std::error_code ec;
  if (fs::is_directory(folder, ec)) return;
  for (fs::path p = folder; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p, ec)) {
      if (!fs::is_directory(p, ec)) cannot_write(flag, path, "'" + p.string() + "' is not a folder");
      break;
    }
    if (p == p.parent_path()) break;
  }
  cannot_write(flag, path, "the folder '" + folder.string() + "' does not exist");
}

void check_writable(const std::string& flag, const std::string& path) {
  const fs::path target = resolved(path);
  std::error_code ec;
  if (target.filename().empty() || fs::is_directory(target, ec))
    throw InputError(flag + ": '" + path + "' is a folder; give a file name");
  if (is_special(target)) {
    if (::access(target.c_str(), W_OK) != 0) cannot_write(flag, path, std::strerror(errno));
    return;
  }
  const fs::path folder = folder_of(target);
  check_folder(flag, path, folder);
  // The one sure test of writing a file into a folder (permissions, a read-only mount, root) is
  // to create one there.
  std::string probe;
  const int fd = create_beside(target, probe);
  if (fd < 0) cannot_write(flag, path, "cannot create a file in '" + folder.string() + "': " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  // A read-only file says "do not change me", even though its folder would let a rename replace it.
  if (fs::exists(target, ec) && ::access(target.c_str(), W_OK) != 0)
    cannot_write(flag, path, "the file is not writable (" + std::string(std::strerror(errno)) + ")");
}

// Whether two outputs end in one file (after "./", "a/../" and symbolic links).
bool same_file(const std::string& a, const std::string& b) {
  if (is_special(a) || is_special(b)) return false;  // two reports may well go to /dev/null
  std::error_code ec;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return ca == cb;
}

std::string listed(const std::vector<std::string>& flags) {
  std::string s;
  for (std::size_t i = 0; i < flags.size(); ++i) s += (i == 0 ? "" : i + 1 == flags.size() ? " and " : ", ") + flags[i];
  return s;
}

}  // namespace

void check_outputs(const std::vector<Output>& outputs) {
  std::vector<std::string> on_stdout;
  for (const Output& o : outputs) {
    if (o.path == "-") on_stdout.push_back(o.flag);
  }
  if (on_stdout.size() > 1) {
    throw InputError(listed(on_stdout) + (on_stdout.size() == 2 ? " both" : " all") +
                     " write to stdout ('-'), where only one output can go; give " +
                     (on_stdout.size() == 2 ? "the other" : "the others") + " a file name");
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Output& a = outputs[i];
    if (a.path.empty() || a.path == "-") continue;
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      const Output& b = outputs[j];
      if (!b.path.empty() && b.path != "-" && same_file(a.path, b.path))
        throw InputError(a.flag + " and " + b.flag + " both write '" + b.path + "'; give each output its own file");
    }
    check_writable(a.flag, a.path);
  }
}

void write_output(const std::string& flag, const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text << std::flush;
    if (!std::cout) throw InputError(flag + ": cannot write to stdout");
    return;
  }
  if (is_special(path)) {
    std::ofstream out(path, std::ios::binary);
    out << text << std::flush;
    if (!out) cannot_write(flag, path, "the write failed");
    return;
  }
  PendingFile file(flag, path, text);
  file.commit();
}

PendingFile::PendingFile(std::string flag, std::string target, const std::string& text)
    : flag_(std::move(flag)), path_(std::move(target)), target_(resolved(path_).string()) {
  const int fd = create_beside(target_, temp_);
  if (fd < 0) cannot_write(flag_, path_, std::strerror(errno));
  struct stat existing {};
  if (::stat(target_.c_str(), &existing) == 0) ::fchmod(fd, existing.st_mode & 07777);  // keep its permissions
  const char* data = text.data();
  std::size_t left = text.size();
  int error = 0;
  while (left > 0 && error == 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno != EINTR) error = errno;
    if (n > 0) {
      data += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  if (::close(fd) != 0 && error == 0) error = errno;  // NFS reports a failed write at close
  if (error != 0) {
    ::unlink(temp_.c_str());
    cannot_write(flag_, path_, std::strerror(error));
  }
}

PendingFile::~PendingFile() {
  if (!done_) ::unlink(temp_.c_str());
}

void PendingFile::commit() { rename_to(target_); }

void PendingFile::keep_as(const std::string& other) { rename_to(other); }

void PendingFile::rename_to(const std::string& path) {
  done_ = true;
  if (::rename(temp_.c_str(), path.c_str()) == 0) return;
  const int error = errno;
  ::unlink(temp_.c_str());
  cannot_write(flag_, path, std::strerror(error));
}

}  // namespace moesim::cli
