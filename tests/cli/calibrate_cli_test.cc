// `moesim calibrate`: its input is checked before any GPU is looked for; without the GPU runtime,
// or without a usable GPU, it says so and exits 2. (The measurement itself is tested on a
// modelled device in tests/runtime/bench, and run on a GPU by validate/gpu_session.sh.) With
// --alltoall-log it fits the node's network to an nccl-tests log, on any build.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

TEST_F(Cli, CalibrateWithoutAGpuExitsTwoWithTheReason) {
  const Result r = run("calibrate --hardware hardware/nodes/hgx-h100.yaml --output " + (dir_ / "c.yaml").string());
#if MOESIM_CLI_HAVE_CUDA
  if (r.exit_code == 0) GTEST_SKIP() << "a GPU is present; this test covers machines without one";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: `moesim calibrate` needs a GPU, and none is usable: "), std::string::npos) << r.err;
#else
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: this build of moesim has no GPU runtime"), std::string::npos) << r.err;
#endif
}

TEST_F(Cli, CalibrateChecksItsInputBeforeLookingForAGpu) {
  const std::string base = "calibrate --hardware hardware/nodes/hgx-h100.yaml --output " + (dir_ / "c.yaml").string();
  struct Case {
    std::string args;
    std::string expect;
  };
  const Case cases[] = {
      {base + " --dtypes int8", "--dtypes: 'int8' is not a dtype"},
      {base + " --dtypes bf16,fp8", "--dtypes: fp8 cannot be measured: the GPU runtime has no FP8 GEMMs"},
      {"calibrate --hardware hardware/nodes/dgx-1-v100.yaml --output x.yaml --dtypes bf16",
       "GPU 'V100-SXM2-16GB' (hardware/nodes/../gpus/v100-sxm2-16gb.yaml:20:1) has no peak_flops for bf16"},
      {base + " --dims 64,32", "--dims must be strictly increasing; 32 follows 64"},
      {base + " --dims 0,32", "--dims"},
      {base + " --copy-size 12", "--copy-size must be at least 1K"},
      {base + " --min-time-ms 0", "error: --min-time-ms: 0 is outside (0, 10000]"},
      {base + " --device -1", "error: --device: -1 is negative; it must be in [0, 1023]"},
      {"calibrate --hardware hardware/nodes/nope.yaml --output x.yaml", "nope.yaml"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
  EXPECT_EQ(run("calibrate --help").exit_code, 0);
  EXPECT_EQ(run("calibrate --hardware hardware/nodes/hgx-h100.yaml").exit_code, 2);  // --output is required
}

// An alltoall_perf log of `ranks` GPUs named `gpu` on `hosts` (node-a, node-b, ...; each host's
// ranks on its devices 0, 1, ...): t = `latency_us` + (ranks - 1) x bytes per peer / `gb_per_s`
// GB/s, out of place; `redop` as the log would say.
const std::string kH100 = "NVIDIA H100 80GB HBM3", kA100 = "NVIDIA A100-SXM4-40GB";
std::string alltoall_log(int ranks, int hosts = 1, const std::string& redop = "none", double gb_per_s = 350,
                         const std::string& gpu = kH100, double latency_us = 25) {
  std::ostringstream log;
  log << "# nThread 1 nGpus 1 minBytes 1024 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20\n#\n";
  const int per_host = ranks / hosts;
  for (int r = 0; r < ranks; ++r)
    log << "#  Rank  " << r << " Group  0 Pid  " << 4000 + r << " on    node-" << static_cast<char>('a' + r / per_host)
        << " device  " << r % per_host << " [0x1b] " << gpu << "\n";
  log << "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
  for (long long size = 1024; size <= (1LL << 30); size *= 4) {
    const double us = latency_us + (ranks - 1) * (static_cast<double>(size) / ranks) / (gb_per_s * 1e3);
    char line[256];
    std::snprintf(line, sizeof line, "%12lld %13lld %9s %7s %7d %8.2f %7.2f %7.2f %6d %8.2f %7.2f %7.2f  N/A\n", size,
                  size / 4, "float", redop.c_str(), -1, us, 1.0, 1.0, 0, us, 1.0, 1.0);
    log << line;
  }
  log << "# Out of bounds values : 0 OK\n";
  return log.str();
}

// The time (us) `moesim collective` prints for `size`.
double time_of_row(const std::string& out, long long size) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    long long s = 0, count = 0;
    std::string type, redop;
    int root = 0;
    double time = 0;
    if (row >> s >> count >> type >> redop >> root >> time && s == size) return time;
  }
  ADD_FAILURE() << "no row of " << size << " bytes in\n" << out;
  return -1;
}

TEST_F(Cli, CalibrateFitsTheNodesNetworkToAnAllToAllLog) {
  const std::string log = write("a2a.log", alltoall_log(8)).string();
  const std::string out = (dir_ / "net.yaml").string();
  const Result r = run("calibrate --hardware hardware/nodes/hgx-h100.yaml --alltoall-log " + log + " --output " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("all-to-all of 8 GPUs, 11 sizes: latency 25.00 us, bandwidth 350.0 GB/s per GPU"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("calibrated alpha-beta within 0.0%, flow within 0.0%"), std::string::npos) << r.out;
  // An exact line: nothing scatters around it (the log's 2-decimal times round a little).
  EXPECT_NE(r.out.find("the measured times around the line: rms 0.0%, worst 0.0%"), std::string::npos) << r.out;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  const std::string key = "intra_node: {bandwidth: ";
  const std::size_t at = text.str().find(key);
  ASSERT_NE(at, std::string::npos) << text.str();
  EXPECT_NEAR(std::stod(text.str().substr(at + key.size())), 350.0, 0.05) << text.str();  // GB/s, from 2-decimal times
  EXPECT_NE(text.str().find("link_types:\n  nvlink4: "), std::string::npos) << text.str();
  // The calibrated simulator prints what the log measured, in the log's own format.
  const Result c = run("collective --hardware hardware/nodes/hgx-h100.yaml --calibration " + out +
                       " --ranks 8 -b 16M -e 16M");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  // (The calibrated latency is one per round of peers, 7 of them, each a whole ns.)
  const double want = 25.0 + 7 * (16777216.0 / 8) / 350e3;
  EXPECT_NEAR(time_of_row(c.out, 16777216), want, 0.01) << c.out;
  // And the same file as a simulation's --calibration.
  EXPECT_EQ(run("simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/nodes/hgx-h100.yaml --calibration " +
                out + " --tokens 1024 --ep 8").exit_code, 0);
}

TEST_F(Cli, CalibrateAddsTheNetworkToAGpuCalibrationGivenAsBase) {
  const std::string base = write("gpu.yaml",
                                 "schema_version: 1\nkind: calibration\nname: h100\ngpu: H100-SXM5-80GB\n"
                                 "kernel_launch_overhead: 4 us\n").string();
  const std::string out = (dir_ / "both.yaml").string();
  const Result r = run("calibrate --hardware hardware/nodes/hgx-h100.yaml --alltoall-log " +
                       write("a2a.log", alltoall_log(8)).string() + " --base " + base + " --output " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Result s = run("simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/nodes/hgx-h100.yaml "
                       "--calibration " + out + " --tokens 1024 --ep 4 --json -");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("\"kernel_launch_ns\": 4000"), std::string::npos);  // the base's value kept
  // A base that already has network sections is refused.
  const Result again = run("calibrate --hardware hardware/nodes/hgx-h100.yaml --alltoall-log " +
                           (dir_ / "a2a.log").string() + " --base " + out + " --output " + (dir_ / "x.yaml").string());
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--base already calibrates the network"), std::string::npos) << again.err;
}

// The number printed for `label` in `text` (the first one after it).
double number_after(const std::string& text, const std::string& label) {
  const std::size_t at = text.find(label);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + label.size()));
}

TEST_F(Cli, CalibrateFitsTheInterNodeNetworkToALogAcrossNodes) {
  // First the intra-node network from one node's log, then the inter-node one on top of it.
  const std::string intra = (dir_ / "intra.yaml").string();
  const Result r1 = run("calibrate --hardware hardware/nodes/dgx-a100.yaml --alltoall-log " +
                        write("one.log", alltoall_log(8, 1, "none", 200, kA100)).string() + " --output " + intra);
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  const std::string cluster = "hardware/clusters/dgx-a100-2node.yaml";
  // 150 us: above the least NCCL's rounds of peers cost on 16 GPUs (8.4 us + 15 x 3 us).
  const std::string two = write("two.log", alltoall_log(16, 2, "none", 12, kA100, 150)).string();
  const std::string both = (dir_ / "both.yaml").string();
  const Result r2 = run("calibrate --hardware " + cluster + " --alltoall-log " + two + " --base " + intra + " --output " + both);
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  // The link's latency is per round of peers: (150 us - 8.4 us) / 15 rounds.
  EXPECT_NE(r2.out.find("all-to-all of 16 GPUs on 2 nodes, 11 sizes: latency 150.00 us, bandwidth 12.0 GB/s per GPU "
                        "(alpha-beta inter_node 6.4 GB/s per GPU, latency 9.44 us)"),
            std::string::npos) << r2.out;
  EXPECT_EQ(r2.out.find("keep --hardware's values"), std::string::npos) << r2.out;  // --base calibrated them
  std::ifstream in(both);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NEAR(number_after(text.str(), "\nintra_node: {bandwidth: "), 200.0, 0.05) << text.str();  // from --base
  EXPECT_NEAR(number_after(text.str(), "\ninter_node: {bandwidth: "), 6.4, 0.005) << text.str();
  EXPECT_NE(text.str().find("\nnic_port: {"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("inter_node_all_to_all:\n  ranks: 16\n  nodes: 2\n"), std::string::npos) << text.str();
  // The calibrated cluster gives back the log's times.
  for (const char* network : {"alpha-beta", "flow"}) {
    const Result c = run("collective --hardware " + cluster + " --calibration " + both + " --ranks 16 -b 16M -e 16M --network " +
                         network);
    ASSERT_EQ(c.exit_code, 0) << c.err;
    const double want = 150.0 + 15 * (16777216.0 / 16) / 12e3;
    EXPECT_NEAR(time_of_row(c.out, 16777216), want, 0.1) << network << "\n" << c.out;
  }
  EXPECT_EQ(run("simulate --model models/moe-gpt-s-64e.yaml --hardware " + cluster + " --calibration " + both +
                " --tokens 1024 --ep 16").exit_code, 0);
  // Without --base the intra-node links are the preset's, and the output says so.
  const Result alone = run("calibrate --hardware " + cluster + " --alltoall-log " + two + " --output " +
                           (dir_ / "inter.yaml").string());
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_NE(alone.out.find("note: the intra-node links keep --hardware's values"), std::string::npos) << alone.out;
  // What --base may hold: not the inter-node network again, and an intra-node fit comes first.
  const Result again = run("calibrate --hardware " + cluster + " --alltoall-log " + two + " --base " + both + " --output " +
                           (dir_ / "x.yaml").string());
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--base already calibrates the inter-node network"), std::string::npos) << again.err;
  // A preset whose node already names a calibration would get a second one: refused.
  const std::string calibrated_node = write("node.yaml",
      "schema_version: 1\nkind: node\nname: dgx\ngpu: " + std::string(MOESIM_SOURCE_DIR) +
      "/hardware/gpus/a100-sxm4-40gb.yaml\ngpus_per_node: 8\nintra_node: {bandwidth: 300 GB/s, latency: 3 us}\n"
      "pcie: {h2d_bandwidth: 25 GB/s, d2h_bandwidth: 25 GB/s, latency: 10 us}\ncalibration: gpu.yaml\n").string();
  const std::string gpu_only = write("gpu.yaml", "schema_version: 1\nkind: calibration\nname: a\ngpu: A100-SXM4-40GB\n").string();
  const Result twice = run("calibrate --hardware " + calibrated_node + " --alltoall-log " + (dir_ / "one.log").string() +
                           " --output " + (dir_ / "x.yaml").string());
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("node 'dgx' already has a calibration (" + gpu_only +
                           "), and a node takes one: give --hardware a preset without the calibration: key, and that "
                           "file as --base"),
            std::string::npos) << twice.err;
  // Where that file already calibrates the network being fitted, --base is no way out: not offered.
  std::ifstream node_text(calibrated_node);
  std::stringstream with_network;
  with_network << node_text.rdbuf();
  std::string node2 = with_network.str();
  node2.replace(node2.find("calibration: gpu.yaml"), 21, "calibration: net-only.yaml");
  write("net-only.yaml", "schema_version: 1\nkind: calibration\nname: n\ngpu: A100-SXM4-40GB\n"
                         "intra_node: {bandwidth: 200 GB/s, latency: 20 us}\n");
  const Result held = run("calibrate --hardware " + write("node2.yaml", node2).string() + " --alltoall-log " +
                          (dir_ / "one.log").string() + " --output " + (dir_ / "x.yaml").string());
  EXPECT_EQ(held.exit_code, 2);
  EXPECT_NE(held.err.find("give --hardware a preset without the calibration: key (that file already calibrates this "
                          "network)"),
            std::string::npos) << held.err;
  const Result order = run("calibrate --hardware hardware/nodes/dgx-a100.yaml --alltoall-log " + (dir_ / "one.log").string() +
                           " --base " + (dir_ / "inter.yaml").string() + " --output " + (dir_ / "x.yaml").string());
  EXPECT_EQ(order.exit_code, 2);
  EXPECT_NE(order.err.find("fitted on top of the intra-node one: fit this one-node measurement first"), std::string::npos)
      << order.err;
}

TEST_F(Cli, CalibratePlacesEachLoggedRankOnItsNodeAndDevice) {
  const std::string cluster = "calibrate --hardware hardware/clusters/dgx-a100-2node.yaml --output " + (dir_ / "p.yaml").string();
  // One process per GPU, each seeing its GPU as device 0: the ranks of a host take its GPUs in order.
  std::string per_process = alltoall_log(16, 2, "none", 12, kA100);
  for (std::size_t at = 0; (at = per_process.find(" device  ", at)) != std::string::npos; at += 9)
    per_process[at + 9] = '0';
  const Result r = run(cluster + " --alltoall-log " + write("mpi.log", per_process).string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: host node-a: its ranks name no device or repeat one"), std::string::npos) << r.out;
  // A device the node does not have, and ranks with a gap, are named by line.
  std::string beyond = alltoall_log(16, 2, "none", 12, kA100);
  beyond.replace(beyond.find(" device  7 "), 11, " device  9 ");
  const Result b = run(cluster + " --alltoall-log " + write("beyond.log", beyond).string());
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find("beyond.log:10:1: rank 7 ran on device 9 and node 'DGX-A100-40GB'"), std::string::npos) << b.err;
  std::string gap = alltoall_log(16, 2, "none", 12, kA100);
  gap.replace(gap.find("#  Rank  3 "), 11, "#  Rank 33 ");
  const Result g = run(cluster + " --alltoall-log " + write("gap.log", gap).string());
  EXPECT_EQ(g.exit_code, 2);
  EXPECT_NE(g.err.find("gap.log:7:1: rank 4 is listed but rank 3 is not: the '#  Rank' lines must cover ranks 0 to 15"),
            std::string::npos) << g.err;
}

// The rows "size measured simulated diff" that `collective --against` prints, by size.
std::map<long long, std::array<double, 3>> against_rows(const std::string& out) {
  std::map<long long, std::array<double, 3>> rows;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    if (l.empty() || l[0] == '#') continue;
    std::istringstream f(l);
    long long size = 0;
    std::array<double, 3> v{};
    if (f >> size >> v[0] >> v[1] >> v[2]) rows[size] = v;
  }
  return rows;
}

TEST_F(Cli, CollectiveHoldsTheSimulationAgainstALog) {
  const std::string log = write("a2a.log", alltoall_log(8, 1, "none", 200, kA100)).string();
  // The helper's logs do not name their test: --op says what they measured.
  const std::string node = "collective --hardware hardware/nodes/dgx-a100.yaml --op all-to-all --against " + log;
  const Result plain = run(node);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("all-to-all on DGX-A100-40GB, 8 ranks on 1 node"), std::string::npos) << plain.out;
  const auto rows = against_rows(plain.out);
  ASSERT_EQ(rows.size(), 11u) << plain.out;
  EXPECT_DOUBLE_EQ(rows.at(1024)[0], 25.0);  // the log's out-of-place time
  EXPECT_NE(plain.out.find("# worst "), std::string::npos);
  // Calibrated on that log, the simulation gives it back.
  const std::string cal = (dir_ / "net.yaml").string();
  ASSERT_EQ(run("calibrate --hardware hardware/nodes/dgx-a100.yaml --alltoall-log " + log + " --output " + cal).exit_code, 0);
  for (const char* network : {"alpha-beta", "flow"}) {
    const Result fitted = run(node + " --calibration " + cal + " --network " + network);
    ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
    for (const auto& [size, v] : against_rows(fitted.out)) EXPECT_LT(std::abs(v[2]), 0.2) << network << " " << size;
  }
  // The collective is the log's: an all_reduce_perf log is simulated as an all-reduce, for 1 GiB
  // NCCL's ring with Simple: 8.4 us + 14 x 3.4 us + 2(n-1)/n x size / (300 GB/s x 0.77) on a DGX
  // A100's NVSwitch.
  const std::string ar = write("ar.log", "# Collective test starting: all_reduce_perf\n" + alltoall_log(8, 1, "sum")).string();
  const Result reduce = run("collective --hardware hardware/nodes/dgx-a100.yaml --network alpha-beta --against " + ar);
  ASSERT_EQ(reduce.exit_code, 0) << reduce.err;
  EXPECT_NE(reduce.out.find("all-reduce on DGX-A100-40GB, 8 ranks"), std::string::npos) << reduce.out;
  const double want_us = 8.4 + 14 * 3.4 + 14.0 / 8 * 1073741824.0 / (300e3 * 0.77);
  EXPECT_NEAR(against_rows(reduce.out).at(1073741824)[1], want_us, 0.01) << reduce.out;
  // What cannot be held against the simulation is refused.
  struct Case {
    std::string args;
    std::string expect;
  };
  const Case cases[] = {
      {"collective --hardware hardware/nodes/dgx-a100.yaml --against " +
           write("bc.log", "# Collective test starting: broadcast_perf\n" + alltoall_log(8)).string(),
       "bc.log: this is a log of broadcast_perf; moesim models alltoall_perf, all_reduce_perf"},
      {"collective --hardware hardware/nodes/dgx-a100.yaml --op all-gather --against " + ar,
       "ar.log: this is a log of all_reduce_perf (all-reduce), and --op says all-gather"},
      {"collective --hardware hardware/nodes/dgx-a100.yaml --op all-to-all --against " +
           write("sum.log", alltoall_log(8, 1, "sum")).string(),
       "sum.log:12:1: redop 'sum' is not that of all-to-all ('none'); give the --op the log measured"},
      {"collective --hardware hardware/nodes/dgx-a100.yaml --against " + log,
       "a2a.log: the log does not name its collective (no 'Collective test starting' line); give --op"},
      {"collective --hardware hardware/nodes/dgx-a100.yaml --against ''", "--against: the value is empty"},
      {"collective --hardware hardware/nodes/dgx-a100.yaml --op all-to-all --against " +
           write("one.log", alltoall_log(1)).string(),
       "one.log: the log ran on one rank"},
      {node + " -b 1M", "--min-bytes excludes --against"},
      {"collective --hardware hardware/nodes/dgx-a100.yaml --op all-to-all --against " + write("two.log", alltoall_log(16, 2)).string(),
       "ran on 2 hosts (node-a, node-b) and 'DGX-A100-40GB'"},
      {node + " --ranks 4", "the log lists 8 ranks, --ranks says 4"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
}

// A log measured on another GPU would move this preset's links by what that GPU's network did:
// refused with the log's line and both names, unless --force, which fits it with a note.
TEST_F(Cli, CalibrateRefusesALogOfAnotherGpuUnlessForced) {
  const std::string log = write("h100.log", alltoall_log(8)).string();  // "NVIDIA H100 80GB HBM3"
  const std::string args = "calibrate --hardware hardware/nodes/dgx-a100.yaml --alltoall-log " + log + " --output " +
                           (dir_ / "n.yaml").string();
  const Result refused = run(args);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find(log + ":3:"), std::string::npos) << refused.err;  // rank 0's line
  EXPECT_NE(refused.err.find("rank 0 ran on 'NVIDIA H100 80GB HBM3', not the preset's A100-SXM4-40GB (chip H100 is "
                             "not A100); give --hardware the preset of that GPU, or --force"),
            std::string::npos)
      << refused.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "n.yaml"));
  const Result forced = run(args + " --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("note: rank 0 ran on 'NVIDIA H100 80GB HBM3', not the preset's A100-SXM4-40GB (chip H100 "
                            "is not A100); fitted anyway (--force)"),
            std::string::npos)
      << forced.out;
  EXPECT_EQ(run("calibrate --hardware hardware/nodes/dgx-a100.yaml --force --output x.yaml").exit_code, 2);  // needs a log
  // Holding a simulation against another GPU's log is a question one may ask: a note, no refusal.
  const Result against = run("collective --hardware hardware/nodes/dgx-a100.yaml --op all-to-all --against " + log);
  ASSERT_EQ(against.exit_code, 0) << against.err;
  EXPECT_NE(against.out.find("# note: rank 0 ran on 'NVIDIA H100 80GB HBM3', not the preset's A100-SXM4-40GB (chip "
                             "H100 is not A100): the simulation is of the preset's GPU"),
            std::string::npos)
      << against.out;
}

// A log of part of what --hardware describes is not a measurement of it: refused, naming the
// log's last '#  Rank' line and the rule, unless --force (a note). One node's GPUs fit a node, or
// a cluster's node; every GPU of every node fits the cluster.
TEST_F(Cli, CalibrateRefusesALogOfPartOfThePresetUnlessForced) {
  const std::string out = " --output " + (dir_ / "part.yaml").string();
  const std::string quarter = write("four.log", alltoall_log(4, 1, "none", 200, kA100)).string();
  const std::string node = "calibrate --hardware hardware/nodes/dgx-a100.yaml --alltoall-log " + quarter + out;
  const Result refused = run(node);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find(quarter + ":6:1: the all-to-all ran on 4 ranks on 1 host and node 'DGX-A100-40GB' ("),
            std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(") has 8 GPUs: a one-node log calibrates the links of the whole node, and part of it "
                             "shares them otherwise; give --hardware a preset of the GPUs it ran on"),
            std::string::npos) << refused.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "part.yaml"));
  const Result forced = run(node + " --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("note: the all-to-all ran on 4 ranks on 1 host"), std::string::npos) << forced.out;
  EXPECT_NE(forced.out.find("fitted anyway (--force): its links are those of the logged GPUs"), std::string::npos)
      << forced.out;
  // Part of each node of a cluster.
  const std::string cluster = "calibrate --hardware hardware/clusters/dgx-a100-2node.yaml --alltoall-log ";
  const std::string halves = write("halves.log", alltoall_log(8, 2, "none", 12, kA100, 150)).string();
  const Result half = run(cluster + halves + out);
  EXPECT_EQ(half.exit_code, 2) << half.err;
  EXPECT_NE(half.err.find(halves + ":10:1: the all-to-all ran on 8 ranks on 2 hosts and 'DGX-A100-2node' ("),
            std::string::npos) << half.err;
  EXPECT_NE(half.err.find(") has 16 GPUs on 2 nodes: a log across nodes calibrates the inter-node network of the whole "
                          "cluster"),
            std::string::npos) << half.err;
  const Result half_forced = run(cluster + halves + out + " --force");
  ASSERT_EQ(half_forced.exit_code, 0) << half_forced.err;
  EXPECT_NE(half_forced.out.find("note: the all-to-all ran on 8 ranks on 2 hosts"), std::string::npos) << half_forced.out;
  // A bare log of --ranks GPUs: the file is named without a line.
  std::string bare;
  std::istringstream lines(alltoall_log(4, 1, "none", 200, kA100));
  for (std::string l; std::getline(lines, l);)
    if (l.find("#  Rank") == std::string::npos) bare += l + "\n";
  const std::string bare_log = write("bare4.log", bare).string();
  const Result unlisted = run("calibrate --hardware hardware/nodes/dgx-a100.yaml --alltoall-log " + bare_log +
                              " --ranks 4" + out);
  EXPECT_EQ(unlisted.exit_code, 2);
  EXPECT_NE(unlisted.err.find(bare_log + ": the all-to-all ran on 4 ranks on 1 host"), std::string::npos) << unlisted.err;
  // Accepted: one node's GPUs against a cluster of that node (its links).
  const Result one_node = run(cluster + write("eight.log", alltoall_log(8, 1, "none", 200, kA100)).string() + out);
  ASSERT_EQ(one_node.exit_code, 0) << one_node.err;
  EXPECT_NE(one_node.out.find("all-to-all of 8 GPUs, 11 sizes"), std::string::npos) << one_node.out;
}

TEST_F(Cli, CalibrateRefusesLogsItCannotFit) {
  const std::string hw = "calibrate --hardware hardware/nodes/hgx-h100.yaml --output " + (dir_ / "n.yaml").string();
  struct Case {
    std::string args;
    std::string expect;
  };
  const std::string two_hosts = write("two.log", alltoall_log(16, 2)).string();
  const std::string reduce = write("ar.log", alltoall_log(8, 1, "sum")).string();
  std::string no_ranks = alltoall_log(8);
  std::string stripped;
  std::istringstream lines(no_ranks);
  for (std::string l; std::getline(lines, l);)
    if (l.find("#  Rank") == std::string::npos) stripped += l + "\n";
  const std::string bare = write("bare.log", stripped).string();
  const std::string gather = write("ag.log", "# Collective test starting: all_gather_perf\n" + alltoall_log(8)).string();
  std::string cpu = alltoall_log(8);
  cpu.replace(cpu.find("root     time"), 13, "root  cputime");
  const std::string cputime = write("cpu.log", cpu).string();
  // 100 times slower than any NVLink: the fitted link is off the plausible ranges.
  std::string slow;
  std::istringstream rows(alltoall_log(8));
  for (std::string l; std::getline(rows, l);) {
    std::istringstream f(l);
    std::vector<std::string> t;
    for (std::string x; f >> x;) t.push_back(x);
    if (!l.empty() && l[0] != '#') t[5] = std::to_string(std::stod(t[5]) * 1000);
    for (const std::string& x : t) slow += x + " ";
    slow += "\n";
  }
  const std::string slow_log = write("slow.log", slow).string();
  const std::string a100_base =
      write("a100.yaml", "schema_version: 1\nkind: calibration\nname: a\ngpu: A100-SXM4-40GB\n").string();
  const Case cases[] = {
      {hw + " --alltoall-log " + two_hosts, "ran on 2 hosts (node-a, node-b) and 'HGX-H100' (hardware/nodes/hgx-h100.yaml:5:1) has "
                                            "1 node: give --hardware a cluster of at least that many of its nodes"},
      {hw + " --alltoall-log " + gather, "ag.log: this is a log of all_gather_perf, not of alltoall_perf"},
      {hw + " --alltoall-log " + cputime, "the times are CPU times (nccl-tests -C 1)"},
      {hw + " --alltoall-log " + slow_log, "slow.log: what this measurement gives is off the simulator's plausible ranges"},
      {hw + " --alltoall-log " + bare + " --ranks 8 --base " + a100_base, "a100.yaml:4:"},
      {"calibrate --hardware hardware/gpus/h100-sxm5.yaml --output x.yaml --alltoall-log " + bare + " --ranks 8",
       "has one GPU: there is no network between GPUs to calibrate"},
      {hw + " --alltoall-log " + write("empty.log", "").string(), "no nccl-tests result rows"},
      {hw + " --alltoall-log " + reduce, "ar.log:12:1: redop 'sum': this is not an all-to-all log"},
      {hw + " --alltoall-log " + bare, "the log has no '#  Rank' lines to count its GPUs; give --ranks"},
      {hw + " --alltoall-log " + bare + " --ranks 16",
       "the log has no '#  Rank' lines, so its 16 ranks are taken as GPUs of one node, and node 'HGX-H100' has 8"},
      {hw + " --alltoall-log " + write("a.log", alltoall_log(8)).string() + " --ranks 4", "the log lists 8 ranks, --ranks says 4"},
      {hw + " --alltoall-log " + bare + " --dtypes bf16", "excludes"},
      {hw + " --ranks 8", "--ranks goes with --alltoall-log, --allreduce-log or --collectives"},
      {hw + " --alltoall-log " + (dir_ / "missing.log").string(), "cannot open nccl-tests log"},
      {hw + " --alltoall-log /dev/zero", "'/dev/zero' is not a regular file"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
  // --collectives measures on this machine's GPUs: without them it says why; it excludes a log,
  // and --base needs one of the two.
  const Result coll = run(hw + " --collectives");
  EXPECT_EQ(coll.exit_code, 2) << coll.err;
#if MOESIM_CLI_HAVE_CUDA
  EXPECT_NE(coll.err.find("`moesim calibrate --collectives` needs a GPU, and none is usable"), std::string::npos) << coll.err;
#else
  EXPECT_NE(coll.err.find("so `moesim calibrate --collectives` cannot measure; fit an nccl-tests log"), std::string::npos)
      << coll.err;
#endif
  EXPECT_NE(run(hw + " --collectives --alltoall-log " + bare).err.find("excludes"), std::string::npos);
  const Result base_alone = run(hw + " --base " + bare);
  EXPECT_EQ(base_alone.exit_code, 2);
  EXPECT_NE(base_alone.err.find("--base goes with --alltoall-log, --allreduce-log or --collectives"), std::string::npos)
      << base_alone.err;
  // With --ranks a bare log fits.
  EXPECT_EQ(run(hw + " --alltoall-log " + bare + " --ranks 8").exit_code, 0);
}

}  // namespace

// `moesim validate calibration`: a committed H200 calibration's 9,684 GEMM times against the
// datasheet node, a table row per section and dtype, and one CSV row per point.
TEST_F(Cli, ValidateCalibrationReplaysEveryGemmOfACommittedCalibration) {
  const std::string csv = (dir_ / "points.csv").string();
  const Result r = run("validate calibration --calibration hardware/calibration/h200-sxm-2026-11-27-call1.yaml "
                       "--hardware hardware/nodes/hgx-h200.yaml --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* row : {"gemm             bf16    1728", "batched_gemm     tf32     500", "batched_gemm_tn  bf16     500"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  EXPECT_NE(r.out.find("all 9684 points: median |error| "), std::string::npos) << r.out;
  const std::string points = read_file(csv);
  EXPECT_EQ(std::count(points.begin(), points.end(), '\n'), 9685);
  // The calibration on another GPU's node is refused, naming both.
  const Result h100 = run("validate calibration --calibration hardware/calibration/h200-sxm-2026-11-27-call1.yaml "
                          "--hardware hardware/nodes/hgx-h100.yaml");
  EXPECT_EQ(h100.exit_code, 2);
  EXPECT_NE(h100.err.find("measured on 'H200-SXM-141GB' and cannot be applied to 'H100-SXM5-80GB'"),
            std::string::npos) << h100.err;
}
