// `moesim calibrate --allreduce-log`: NCCL's all-reduce terms fitted to an nccl-tests
// all_reduce_perf log, end to end. A log that `moesim collective` writes with other terms (from a
// calibration file) is fitted back to them within 0.1%; the published A3 Mega log is fitted and
// its residuals shown; logs of another GPU, of other ranks, or of another collective are refused
// naming the file and line.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

// NCCL's NVLink hop latencies x 1.5 and efficiencies x 0.8 (sim/spec/nccl_tuning.h's defaults).
const char* const kTruth = R"(schema_version: 1
kind: calibration
name: truth
gpu: H100-SXM5-80GB
nccl:
  hop_latency:
    nvlink:
      ring: {ll: 0.9 us, ll128: 2.85 us, simple: 5.1 us}
      tree: {ll: 0.9 us, ll128: 1.875 us, simple: 42 us}
  efficiency:
    ring: {ll: 0.2, ll128: 0.736, simple: 0.8}
    tree: {ll: 0.193684208, ll128: 0.69, simple: 0.736}
)";

// The factor printed after `what` ("nvlink hop latencies x 1.4999 +- ...").
double printed_factor(const std::string& out, const std::string& what) {
  const std::size_t at = out.find(what + " x ");
  if (at == std::string::npos) return -1;
  return std::stod(out.substr(at + what.size() + 3));
}

TEST_F(Cli, CalibrateFitsTheModelsOwnAllReduceBackToItsTerms) {
  const std::string truth = write("truth.yaml", kTruth).string();
  const Result logged = run("collective --hardware hardware/nodes/hgx-h100.yaml --calibration " + truth +
                            " --op all-reduce -b 8 -e 1G -f 2");
  ASSERT_EQ(logged.exit_code, 0) << logged.err;
  const std::string log = write("ar.log", logged.out).string();
  const std::string out = (dir_ / "fit.yaml").string();
  const Result r = run("calibrate --hardware hardware/nodes/hgx-h100.yaml --allreduce-log " + log + " --ranks 8 --output " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NEAR(printed_factor(r.out, "nvlink hop latencies"), 1.5, 1.5e-3) << r.out;
  EXPECT_NEAR(printed_factor(r.out, "efficiencies"), 0.8, 0.8e-3) << r.out;
  EXPECT_NE(r.out.find("fit: the measured times around the fitted model: rms 0.0%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ring/simple"), std::string::npos) << r.out;  // each size's algorithm and protocol
  // The file applies: the collective it gives is the log's.
  const Result against = run("collective --hardware hardware/nodes/hgx-h100.yaml --calibration " + out + " --against " +
                             log + " --ranks 8 --op all-reduce");
  ASSERT_EQ(against.exit_code, 0) << against.err;
  EXPECT_EQ(run("simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/nodes/hgx-h100.yaml --calibration " +
                out + " --tokens 1024").exit_code, 0);
  // A file with an all-reduce fit is no --base for another one, nor for an all-to-all fit (which
  // moves the links the all-reduce was fitted on).
  const Result twice = run("calibrate --hardware hardware/nodes/hgx-h100.yaml --allreduce-log " + log +
                           " --ranks 8 --base " + out + " --output " + (dir_ / "b.yaml").string());
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("--base already holds an all-reduce fit"), std::string::npos) << twice.err;
  const Result a2a = run("collective --hardware hardware/nodes/hgx-h100.yaml --op all-to-all -b 1K -e 1M -f 4");
  ASSERT_EQ(a2a.exit_code, 0) << a2a.err;
  const Result links = run("calibrate --hardware hardware/nodes/hgx-h100.yaml --alltoall-log " +
                           write("a2a.log", a2a.out).string() + " --ranks 8 --base " + out + " --output " +
                           (dir_ / "c.yaml").string());
  EXPECT_EQ(links.exit_code, 2);
  EXPECT_NE(links.err.find("--base holds an all-reduce fit, made on the links this fit moves"), std::string::npos)
      << links.err;
}

// The published two-node H100 log (validate/data/): the terms are fitted, and what they cannot
// follow shows in the residuals. On the four-node preset the log is refused: it ran on two.
TEST_F(Cli, CalibrateFitsThePublishedA3MegaAllReduce) {
  const std::string log = "validate/data/h100-a3mega-2node-all-reduce/all_reduce_perf.log";
  const std::string cluster = write("h100-2node.yaml", "schema_version: 1\nkind: cluster\nname: H100-2xHGX-NDR\n"
                                    "source: test\nnode: " + std::string(MOESIM_SOURCE_DIR) + "/hardware/nodes/hgx-h100.yaml" +
                                    "\nnum_nodes: 2\ninter_node: {nic_bandwidth: 400 Gb/s, nics_per_node: 8, "
                                    "efficiency: 0.97, latency: 5 us}\nfabric: {type: rail_optimized, nodes_per_leaf: 2, "
                                    "oversubscription: 1}\n").string();
  const Result r = run("calibrate --hardware " + cluster + " --allreduce-log " + log + " --output " + (dir_ / "a.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("all-reduce of 16 GPUs on 2 nodes, 31 sizes, fitted on the flow model"), std::string::npos) << r.out;
  EXPECT_GT(printed_factor(r.out, "net hop latencies"), 1.0) << r.out;  // TCPXO starts far later than NDR
  EXPECT_LT(printed_factor(r.out, "efficiencies"), 1.0) << r.out;
  const std::string four = "calibrate --hardware hardware/clusters/h100-4x-hgx-ndr.yaml --allreduce-log " + log +
                           " --output " + (dir_ / "b.yaml").string();
  const Result refused = run(four);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find(log + ":19:1: the all-reduce ran on 16 ranks on 2 hosts and 'H100-4xHGX-NDR'"),
            std::string::npos) << refused.err;
  const Result forced = run(four + " --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("fitted anyway (--force)"), std::string::npos) << forced.out;
}

TEST_F(Cli, CalibrateRefusesAnAllReduceLogItCannotFit) {
  const std::string a3 = "validate/data/h100-a3mega-2node-all-reduce/all_reduce_perf.log";
  const std::string out = " --output " + (dir_ / "x.yaml").string();
  std::string none_redop = "#  Rank  0 Group  0 Pid 1 on a device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
                           "#  Rank  1 Group  0 Pid 2 on a device  1 [0x1c] NVIDIA H100 80GB HBM3\n";
  for (long long s = 1024; s <= 65536; s *= 4) none_redop += std::to_string(s) + " 256 float none -1 20.0 0 0 0 20.0 0 0 0\n";
  const std::string none_log = write("none.log", none_redop).string();
  const std::string a2a = write("a2a.log", "# Collective test starting: alltoall_perf\n" + none_redop).string();
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"calibrate --hardware hardware/nodes/dgx-a100.yaml --allreduce-log " + a3 + out,
       a3 + ":4:1: rank 0 ran on 'NVIDIA H100 80GB HBM3', not the preset's A100-SXM4-40GB"},
      {"calibrate --hardware hardware/nodes/hgx-h100.yaml --allreduce-log " + a3 + out,
       a3 + ":19:1: the all-reduce ran on 16 ranks on 2 hosts and 'HGX-H100'"},
      {"calibrate --hardware hardware/nodes/hgx-h100.yaml --force --allreduce-log " + none_log + out,
       none_log + ":3:1: redop 'none': this is not an all-reduce log"},
      {"calibrate --hardware hardware/nodes/hgx-h100.yaml --allreduce-log " + a2a + out,
       "this is a log of alltoall_perf, not of all_reduce_perf"},
      {"calibrate --hardware hardware/nodes/hgx-h100.yaml --force" + out,
       "--force goes with --alltoall-log or --allreduce-log"},
      {"calibrate --hardware hardware/nodes/hgx-h100.yaml --allreduce-log " + a3 + " --alltoall-log " + a3 + out,
       "excludes"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
}

}  // namespace
