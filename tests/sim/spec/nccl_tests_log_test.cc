// nccl-tests output as `moesim calibrate --alltoall-log` reads it: each rank's host and device from the
// "#  Rank" lines (both header formats), the out-of-place time of each row, other output skipped,
// malformed rows named by file and line.
#include "sim/spec/nccl_tests_log.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using testing::input_error_of;

const std::string kLog =
    "# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 4(factor) warmup iters: 5 iters: 20\n"
    "#\n"
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid  4000 on    node-a device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
    "#  Rank  1 Group  0 Pid  4001 on    node-a device  1 [0x2c] NVIDIA H100 80GB HBM3\n"
    "node-a:4000:4000 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
    "#\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
    "        1024           256     float    none      -1    22.56    0.05    0.02      0    21.90    0.05    0.02    N/A\n"
    "        4096          1024     float    none      -1    23.10    0.18    0.09      0    23.00    0.18    0.09    N/A\n"
    "# Out of bounds values : 0 OK\n"
    "# Avg bus bandwidth    : 0.055\n";

TEST(NcclTestsLog, ReadsTheGpuAfterAPciAddress) {
  // Newer nccl-tests name the device by its PCI address (the published A3 Mega log,
  // validate/data/h100-a3mega-2node-all-reduce).
  const NcclTestsLog log = parse_nccl_tests_text(
      "#  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100 80GB HBM3\n", "ar.log");
  ASSERT_EQ(log.placement.size(), 1u);
  EXPECT_EQ(log.placement[0].device, 0);
  EXPECT_EQ(log.placement[0].gpu, "NVIDIA H100 80GB HBM3");
}

TEST(NcclTestsLog, ReadsRanksHostsAndTheOutOfPlaceTimes) {
  const NcclTestsLog log = parse_nccl_tests_text(kLog, "a2a.log");
  EXPECT_EQ(log.ranks, 2);
  ASSERT_EQ(log.placement.size(), 2u);
  EXPECT_EQ(log.placement[1].host, "node-a");
  EXPECT_EQ(log.placement[1].device, 1);
  EXPECT_EQ(log.placement[1].gpu, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(log.rows.size(), 2u);
  EXPECT_EQ(log.rows[0].size_bytes, 1024);
  EXPECT_EQ(log.rows[0].redop, "none");
  EXPECT_DOUBLE_EQ(log.rows[0].time_us, 22.56);  // out of place, not the in-place 21.90
  EXPECT_EQ(log.rows[0].line, 10);
  EXPECT_DOUBLE_EQ(log.rows[1].time_us, 23.10);
}

TEST(NcclTestsLog, OlderHeadersAndSeveralHosts) {
  const std::string text =
      "#   Rank  0 Pid  39449 on     dgx-01 device  0 [0x07] Tesla V100-SXM2-32GB\n"
      "#   Rank  1 Pid  39450 on     dgx-02 device  0 [0x07] Tesla V100-SXM2-32GB\n"
      "#   Rank  1 Pid  39450 on     dgx-02 device  0 [0x07] Tesla V100-SXM2-32GB\n"  // repeated: counted once
      "     8388608       2097152   float     sum    -1   92.51   90.68  90.68      0   91.22   91.96  91.96    N/A\n";
  const NcclTestsLog log = parse_nccl_tests_text(text, "ar.log");
  EXPECT_EQ(log.ranks, 2);
  ASSERT_EQ(log.placement.size(), 2u);
  EXPECT_EQ(log.placement[0].host, "dgx-01");
  EXPECT_EQ(log.placement[1].host, "dgx-02");
  ASSERT_EQ(log.rows.size(), 1u);
  EXPECT_EQ(log.rows[0].redop, "sum");
  EXPECT_EQ(parse_nccl_tests_text("no table here\n", "x.log").rows.size(), 0u);
}

TEST(NcclTestsLog, OlderAndOddOutputIsReadOrSkipped) {
  const std::string text =
      "# Collective test starting: alltoall_perf\n"
      "#  Rank 7 Group 0 Pid 1 on big device 0 [0x1b] X\n"
      "1 warning generated.\n"                                                   // not a row: no count
      "#       size         count      type   redop    root  cputime   algbw   busbw #wrong\n"
      "           0             0     float    none      -1     6.00    0.00    0.00      0\n"  // -b 8 over 8 ranks
      "        1024           256     float              -1    22.56    0.05    0.02      0\n";  // blank redop
  const NcclTestsLog log = parse_nccl_tests_text(text, "old.log");
  EXPECT_EQ(log.test, "alltoall_perf");
  EXPECT_TRUE(log.cpu_times);
  EXPECT_EQ(log.ranks, 1);
  ASSERT_EQ(log.rows.size(), 1u);  // the size-0 row measured nothing
  EXPECT_EQ(log.rows[0].redop, "");
  EXPECT_DOUBLE_EQ(log.rows[0].time_us, 22.56);
  EXPECT_EQ(log.rows[0].line, 6);
  EXPECT_FALSE(parse_nccl_tests_text(kLog, "a.log").cpu_times);
  ASSERT_EQ(log.placement.size(), 1u);
  EXPECT_EQ(log.placement[0].rank, 7);
  EXPECT_EQ(log.placement[0].host, "big");
}

TEST(NcclTestsLog, EachRankKeepsItsHostAndDevice) {
  const std::string text =
      "#  Rank  1 Group  0 Pid  4001 on    node-b device  3 [0x2c] NVIDIA H100 80GB HBM3\n"
      "#  Rank  0 Group  0 Pid  4000 on    node-a device  5 [0x1b] NVIDIA H100 80GB HBM3\n"
      "#  Rank  2 Group  0 Pid  4002\n";  // no host or device: kept as unknown
  const NcclTestsLog log = parse_nccl_tests_text(text, "p.log");
  ASSERT_EQ(log.placement.size(), 3u);  // ordered by rank
  EXPECT_EQ(log.placement[0].rank, 0);
  EXPECT_EQ(log.placement[0].host, "node-a");
  EXPECT_EQ(log.placement[0].device, 5);
  EXPECT_EQ(log.placement[0].line, 2);
  EXPECT_EQ(log.placement[1].device, 3);
  EXPECT_EQ(log.placement[2].host, "");
  EXPECT_EQ(log.placement[2].device, -1);
  // One rank on two devices is two runs mixed together; a rank id beyond any job is named too.
  std::string msg = input_error_of([&] {
    parse_nccl_tests_text(text + "#  Rank  0 Group  0 Pid  4000 on    node-a device  6 [0x1b] X\n", "p.log");
  });
  EXPECT_NE(msg.find("p.log:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0 is listed again on another host or device (first at line 2)"), std::string::npos) << msg;
  msg = input_error_of([] { parse_nccl_tests_text("#  Rank 99999999999999999999 Group 0 on a device 0\n", "p.log"); });
  EXPECT_NE(msg.find("p.log:1:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("beyond any job"), std::string::npos) << msg;
}

TEST(NcclTestsLog, MalformedRowsAreNamedByFileAndLine) {
  std::string msg = input_error_of([] { parse_nccl_tests_text("# header\n1024 256 float none\n", "a.log"); });
  EXPECT_NE(msg.find("a.log:2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a row of 4 fields"), std::string::npos) << msg;
  msg = input_error_of([] { parse_nccl_tests_text("1024 256 float none -1 fast 0.05 0.02 0\n", "a.log"); });
  EXPECT_NE(msg.find("a.log:1:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the out-of-place time 'fast' is not a positive number"), std::string::npos) << msg;
  msg = input_error_of([] { parse_nccl_tests_text("1024 256 float none -1 -3 0.05 0.02 0\n", "a.log"); });
  EXPECT_NE(msg.find("not a positive number"), std::string::npos) << msg;
  msg = input_error_of([] { parse_nccl_tests_text("1024 256 float none -1 1e-300 0.05 0.02 0\n", "a.log"); });
  EXPECT_NE(msg.find("a.log:1:1: the out-of-place time 1e-300 us is outside 0.01 us to 1000 s"), std::string::npos) << msg;
  msg = input_error_of([] { parse_nccl_tests_text("99999999999999999999 1 float none -1 3 0 0 0\n", "a.log"); });
  EXPECT_NE(msg.find("beyond any message size"), std::string::npos) << msg;
  msg = input_error_of([] { parse_nccl_tests_log("/nonexistent/a2a.log"); });
  EXPECT_NE(msg.find("cannot open nccl-tests log '/nonexistent/a2a.log': no such file"), std::string::npos) << msg;
  // A device used to be read without end (found beside the fuzz target, tests/fuzz).
  msg = input_error_of([] { parse_nccl_tests_log("/dev/zero"); });
  EXPECT_NE(msg.find("'/dev/zero' is not a regular file"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moesim
