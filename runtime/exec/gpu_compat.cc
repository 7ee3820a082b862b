#include "runtime/exec/gpu_compat.h"

#include <cctype>
#include <sstream>
#include <vector>

namespace moesim::runtime {

namespace {

struct ArchEntry {
  int number = 0;          // XY: compute capability X.Y as 10 X + Y
  bool specific = false;   // "a": this exact architecture only
  bool machine_code = true;
  bool ptx = true;
};

// False when the entry is not a number with optional suffixes ("all", "native").
bool parse_entry(std::string text, ArchEntry& e) {
  const auto strip = [&](const std::string& suffix) {
    if (text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
      text.resize(text.size() - suffix.size());
      return true;
    }
    return false;
  };
  if (strip("-real")) e.ptx = false;
  else if (strip("-virtual")) e.machine_code = false;
  if (!text.empty() && (text.back() == 'a' || text.back() == 'f')) {
    e.specific = text.back() == 'a';  // "f" (family) runs across the major's later minors, as plain
    text.pop_back();
  }
  if (text.empty() || text.size() > 4) return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  e.number = std::stoi(text);
  return e.number > 0;
}

bool runs_on(const ArchEntry& e, int major, int minor) {
  const int device = 10 * major + minor;
  if (e.specific) return device == e.number;
  const bool same_major_later_minor = e.number / 10 == major && minor >= e.number % 10;
  return (e.machine_code && same_major_later_minor) || (e.ptx && device >= e.number);
}

std::string sm(int major, int minor) { return "sm_" + std::to_string(major) + std::to_string(minor); }

}  // namespace

std::string architecture_mismatch(const std::string& architectures, int major, int minor, const std::string& gpu) {
  std::vector<ArchEntry> entries;
  std::string item;
  std::istringstream in(architectures);
  while (std::getline(in, item, architectures.find(',') != std::string::npos ? ',' : ';')) {
    if (item.empty()) continue;
    ArchEntry e;
    if (!parse_entry(item, e)) return "";  // "all", "native": nothing to judge by
    entries.push_back(e);
  }
  if (entries.empty()) return "";
  for (const ArchEntry& e : entries)
    if (runs_on(e, major, minor)) return "";
  const std::string wanted = std::to_string(major) + std::to_string(minor);
  std::string why = gpu + " is " + sm(major, minor) + ", and this build's GPU code (CMAKE_CUDA_ARCHITECTURES " +
                    architectures + ") does not run on it: reconfigure with -DCMAKE_CUDA_ARCHITECTURES=" + wanted +
                    " and rebuild";
  if (major * 10 + minor < 75) why += " (CUDA 13 cannot target " + sm(major, minor) + ": build with CUDA 12)";
  return why;
}

std::string tf32_unsupported(int major, int minor, const std::string& gpu) {
  if (major >= 8) return "";
  return "TF32 GEMMs need tensor cores of compute capability 8.0 or later, and " + gpu + " is " + sm(major, minor) +
         " (cuBLAS would run fp32 instead and the report would say tf32): use --dtype fp32";
}

}  // namespace moesim::runtime
