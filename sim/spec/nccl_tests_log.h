// The output of an nccl-tests benchmark (alltoall_perf, all_reduce_perf, ...): the ranks it ran on,
// from its "#  Rank ..." lines, and one row per message size with the out-of-place time. It is how
// a cluster's own measurement of its collectives reaches `moesim calibrate --alltoall-log`.
//
//   #  Rank  0 Group  0 Pid  4242 on    node-a device  0 [0x1b] NVIDIA H100 80GB HBM3
//   #       size         count      type   redop    root     time   algbw   busbw #wrong ...
//           1024            32     float    none      -1    22.56    0.05    0.04      0 ...
//
// Lines of other output (NCCL_DEBUG messages, summaries) are skipped; a line that starts with two
// integers (size and count) is a row and must be complete.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moesim {

struct NcclTestsRow {
  std::int64_t size_bytes = 0;  // the size column: per rank, all peers together for all-to-all
  std::string redop;            // "none" for all-to-all, "sum" for all-reduce, ...; "" when blank
  double time_us = 0;           // out of place
  int line = 0;
};

// Where one rank ran, from its "#  Rank" line.
struct NcclTestsRank {
  int rank = 0;
  std::string host;  // "" when the line names none
  int device = -1;   // the CUDA device as the rank's process saw it; -1 when the line names none
  std::string gpu;   // the device's name after its bus id ("NVIDIA H100 80GB HBM3"); "" when none
  int line = 0;
};

struct NcclTestsLog {
  std::string file;
  int ranks = 0;                         // "#  Rank" lines (0 when the log has none)
  std::vector<NcclTestsRank> placement;  // one per distinct rank, ordered by rank
  std::string test;                // "# Collective test starting: <test>" ("" when absent)
  bool cpu_times = false;          // the header says cputime (nccl-tests -C 1)
  std::vector<NcclTestsRow> rows;  // rows of size 0 (nothing per peer) left out
};

// The first rank whose GPU, as its "#  Rank" line names it, is not `preset_gpu` (gpu_identity.h),
// as "rank R ran on 'NAME', not the preset's PRESET (why)"; nullopt when every named GPU may be
// the preset's (ranks that name none are not checked).
struct LoggedGpuMismatch {
  int line = 0;  // the rank's line
  std::string what;
};
std::optional<LoggedGpuMismatch> logged_gpu_mismatch(const NcclTestsLog& log, const std::string& preset_gpu);

// nccl-tests logs are kilobytes; NCCL_DEBUG=INFO output of a large job is megabytes.
inline constexpr std::uintmax_t kMaxNcclTestsLogBytes = std::uintmax_t{64} << 20;

// Throws InputError naming the file and line for a missing or unreadable file (or one that is not
// a regular file, or larger than kMaxNcclTestsLogBytes), a malformed row, or a rank listed twice
// on different hosts or devices.
NcclTestsLog parse_nccl_tests_log(const std::string& path);
NcclTestsLog parse_nccl_tests_text(const std::string& text, const std::string& file);

}  // namespace moesim
