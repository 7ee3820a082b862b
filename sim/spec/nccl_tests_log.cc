#include "sim/spec/nccl_tests_log.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "sim/core/error.h"

namespace moesim {

namespace {

std::vector<std::string> tokens_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool is_integer(const std::string& t) {
  return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// A decimal number such as 22.56; nullopt-like false for anything else ("N/A", "inf").
bool parse_number(const std::string& t, double& out) {
  std::size_t used = 0;
  try {
    out = std::stod(t, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == t.size() && std::isfinite(out);
}

}  // namespace

NcclTestsLog parse_nccl_tests_text(const std::string& text, const std::string& file) {
  NcclTestsLog log;
  log.file = file;
  std::set<int> ranks;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::vector<std::string> t = tokens_of(line);
    if (t.empty()) continue;
    const auto where = [&] { return SourceLocation{file, number, 1}; };
    if (t[0] == "#") {
      // "#  Rank  3 Group  0 Pid  4242 on  node-a device  3 [0x..] NVIDIA H100 80GB HBM3" (older
      // versions have no Group field).
      if (t.size() >= 3 && t[1] == "Rank" && is_integer(t[2])) {
        ranks.insert(std::stoi(t[2]));
        const auto on = std::find(t.begin(), t.end(), "on");
        if (on != t.end() && on + 1 != t.end() && std::find(log.hosts.begin(), log.hosts.end(), *(on + 1)) == log.hosts.end())
          log.hosts.push_back(*(on + 1));
      }
      continue;
    }
    if (!is_integer(t[0])) continue;  // other output (NCCL_DEBUG lines and the like)
    // size count type redop root time algbw busbw #wrong [in-place: time algbw busbw #wrong]
    if (t.size() < 9) {
      throw InputError(where(), "a row of " + std::to_string(t.size()) +
                                    " fields; nccl-tests rows have size, count, type, redop, root, time, algbw, "
                                    "busbw and #wrong");
    }
    NcclTestsRow row;
    row.line = number;
    if (t[0].size() > 15) throw InputError(where(), "the size " + t[0] + " is beyond any message size");
    row.size_bytes = std::stoll(t[0]);
    row.redop = t[3];
    if (!parse_number(t[5], row.time_us) || !(row.time_us > 0))
      throw InputError(where(), "the out-of-place time '" + t[5] + "' is not a positive number of microseconds");
    if (row.size_bytes <= 0) throw InputError(where(), "the size must be positive, got " + t[0]);
    log.rows.push_back(row);
  }
  log.ranks = static_cast<int>(ranks.size());
  return log;
}

NcclTestsLog parse_nccl_tests_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(SourceLocation{path, 0, 0}, "cannot read this nccl-tests log");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_nccl_tests_text(text.str(), path);
}

}  // namespace moesim
