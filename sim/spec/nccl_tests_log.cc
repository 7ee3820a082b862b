#include "sim/spec/nccl_tests_log.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/spec/gpu_identity.h"

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
  std::map<int, std::size_t> index_of_rank;  // into log.placement
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
        if (t[2].size() > 9) throw InputError(where(), "the rank " + t[2] + " is beyond any job");
        NcclTestsRank rank;
        rank.rank = std::stoi(t[2]);
        rank.line = number;
        const auto on = std::find(t.begin(), t.end(), "on");
        if (on != t.end() && on + 1 != t.end()) rank.host = *(on + 1);
        const auto device = std::find(t.begin(), t.end(), "device");
        if (device != t.end() && device + 1 != t.end() && is_integer(*(device + 1)) && (device + 1)->size() <= 9)
          rank.device = std::stoi(*(device + 1));
        // The name follows the bus id: "[0x1b] NVIDIA H100 80GB HBM3", or in newer nccl-tests its
        // PCI address, "[0000:04:00] NVIDIA H100 80GB HBM3".
        const auto bus = std::find_if(t.begin(), t.end(), [](const std::string& w) {
          return w.size() > 2 && w.front() == '[' && w.back() == ']';
        });
        for (auto w = bus == t.end() ? t.end() : bus + 1; w != t.end(); ++w) rank.gpu += (rank.gpu.empty() ? "" : " ") + *w;
        const auto [seen, fresh] = index_of_rank.emplace(rank.rank, log.placement.size());
        if (fresh) {
          log.placement.push_back(rank);
        } else if (const NcclTestsRank& same = log.placement[seen->second];
                   same.host != rank.host || same.device != rank.device) {
          throw InputError(where(), "rank " + t[2] + " is listed again on another host or device (first at line " +
                                        std::to_string(same.line) + "); give the log of one run");
        }
      }
      // "# Collective test starting: alltoall_perf"
      if (t.size() >= 5 && t[1] == "Collective" && t[3] == "starting:") log.test = t[4];
      if (std::find(t.begin(), t.end(), "cputime") != t.end()) log.cpu_times = true;  // run with -C 1
      continue;
    }
    // A row starts with the size and the element count; anything else is other output (NCCL_DEBUG
    // lines, compiler chatter).
    if (t.size() < 2 || !is_integer(t[0]) || !is_integer(t[1])) continue;
    // size count type redop root time algbw busbw #wrong [in-place: time algbw busbw #wrong]; older
    // alltoall_perf leaves redop blank, so root (an integer) follows the type.
    const bool blank_redop = t.size() > 3 && (is_integer(t[3]) || (t[3].size() > 1 && t[3][0] == '-' && is_integer(t[3].substr(1))));
    const std::size_t time_field = blank_redop ? 4 : 5;
    if (t.size() < time_field + 4) {
      throw InputError(where(), "a row of " + std::to_string(t.size()) +
                                    " fields; nccl-tests rows have size, count, type, redop, root, time, algbw, "
                                    "busbw and #wrong");
    }
    if (t[0].size() > 15) throw InputError(where(), "the size " + t[0] + " is beyond any message size");
    NcclTestsRow row;
    row.line = number;
    row.size_bytes = std::stoll(t[0]);
    if (row.size_bytes == 0) continue;  // small -b sizes round down to nothing per peer: no measurement
    row.redop = blank_redop ? "" : t[3];
    if (!parse_number(t[time_field], row.time_us) || !(row.time_us > 0))
      throw InputError(where(), "the out-of-place time '" + t[time_field] + "' is not a positive number of microseconds");
    // nccl-tests prints times to 0.01 us; a collective of more than 1000 s is no benchmark row.
    if (row.time_us < 0.01 || row.time_us > 1e9)
      throw InputError(where(), "the out-of-place time " + t[time_field] + " us is outside 0.01 us to 1000 s");
    log.rows.push_back(row);
  }
  std::sort(log.placement.begin(), log.placement.end(),
            [](const NcclTestsRank& a, const NcclTestsRank& b) { return a.rank < b.rank; });
  log.ranks = static_cast<int>(log.placement.size());
  return log;
}

NcclTestsLog parse_nccl_tests_log(const std::string& path) {
  return parse_nccl_tests_text(read_input_file(path, kMaxNcclTestsLogBytes, "nccl-tests log"), path);
}

std::optional<LoggedGpuMismatch> logged_gpu_mismatch(const NcclTestsLog& log, const std::string& preset_gpu) {
  for (const NcclTestsRank& r : log.placement) {
    if (r.gpu.empty()) continue;
    const std::string why = gpu_mismatch(r.gpu, preset_gpu);
    if (!why.empty())
      return LoggedGpuMismatch{r.line, "rank " + std::to_string(r.rank) + " ran on '" + r.gpu + "', not the preset's " +
                                           preset_gpu + " (" + why + ")"};
  }
  return std::nullopt;
}

}  // namespace moesim
