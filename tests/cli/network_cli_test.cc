// End-to-end tests of the network model from the command line: topology errors, `moesim
// collective`, and the --network / --a2a options of `simulate`.
#include <gtest/gtest.h>

#include <cstdio>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class NetworkCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("moesim_netcli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Outcome moesim(const std::string& args) const {
    const std::string cmd = std::string("cd ") + MOESIM_SOURCE_DIR + " && " + MOESIM_BINARY + " " + args +
                            " >" + (dir_ / "out").string() + " 2>" + (dir_ / "err").string();
    const int status = std::system(cmd.c_str());
    return Outcome{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "out"), slurp(dir_ / "err")};
  }

  fs::path dir_;
};

TEST_F(NetworkCli, TopologyErrorExitsTwoWithFileAndLine) {
  // dgx-1-v100.yaml with the NVLink pair gpu0-gpu1 naming a GPU the node does not have.
  std::string text = slurp(fs::path(MOESIM_SOURCE_DIR) / "hardware/nodes/dgx-1-v100.yaml");
  const std::string from = "ends: [gpu0, gpu1]";
  const auto pos = text.find(from);
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, from.size(), "ends: [gpu0, gpu9]");
  text.replace(text.find("gpu: ../gpus/"), 13, "gpu: " + std::string(MOESIM_SOURCE_DIR) + "/hardware/gpus/");
  const fs::path bad = dir_ / "bad-node.yaml";
  std::ofstream(bad) << text;
  const Outcome r = moesim("simulate --model models/moe-gpt-s-16e.yaml --hardware " + bad.string() +
                           " --tokens 1024 --ep 8");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("error: " + bad.string() + ":", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("unknown device 'gpu9'"), std::string::npos) << r.err;
}

}  // namespace

namespace {

TEST_F(NetworkCli, NetworkAndAllToAllOptionsSelectTheModel) {
  const std::string base = "simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
                           "--tokens 4096 --chunks 4";
  const Outcome ab = moesim(base + " --network alpha-beta");
  const Outcome flow = moesim(base + " --network flow --a2a 2dh");
  ASSERT_EQ(ab.exit_code, 0) << ab.err;
  ASSERT_EQ(flow.exit_code, 0) << flow.err;
  EXPECT_NE(ab.out, flow.out);
  // The summary names the model that ran; `auto` takes the flow model on a preset with a topology.
  EXPECT_NE(ab.out.find("# network   alpha-beta model, pairwise all-to-all"), std::string::npos) << ab.out;
  EXPECT_NE(flow.out.find("# network   flow model, 2dh all-to-all"), std::string::npos) << flow.out;
  const Outcome automatic = moesim(base);
  EXPECT_NE(automatic.out.find("# network   flow model, pairwise"), std::string::npos) << automatic.out;
  // A node file without a topology section cannot run the flow model; 2dh needs the flow model.
  const Outcome no_topo = moesim("simulate --model models/moe-gpt-s-16e.yaml --hardware hardware/gpus/a100-sxm4-40gb.yaml "
                                 "--tokens 1024 --network flow");
  EXPECT_EQ(no_topo.exit_code, 2);
  EXPECT_NE(no_topo.err.find("no topology"), std::string::npos) << no_topo.err;
  const Outcome bad = moesim(base + " --network alpha-beta --a2a 2dh");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("needs the flow network model"), std::string::npos) << bad.err;
  EXPECT_EQ(moesim(base + " --network ether").exit_code, 2);
}

}  // namespace

namespace {

TEST_F(NetworkCli, CollectivePrintsNcclTestsColumnsAndBusBandwidth) {
  const Outcome r = moesim("collective --hardware hardware/clusters/dgx-a100-2node.yaml --op all-to-all -b 1M -e 1G");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("#        size        count     type  redop   root       time   algbw   busbw #wrong"), std::string::npos)
      << r.out;
  int rows = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    long long size = 0, count = 0;
    std::string type, redop, wrong;
    int root = 0;
    double time_us = 0, algbw = 0, busbw = 0;
    f >> size >> count >> type >> redop >> root >> time_us >> algbw >> busbw >> wrong;
    ++rows;
    EXPECT_EQ(count * 4, size);
    EXPECT_NEAR(algbw, size / (time_us * 1e3), 0.01 * algbw + 0.01);
    EXPECT_NEAR(busbw, algbw * 15 / 16, 0.01);
    EXPECT_EQ(wrong, "N/A");
  }
  EXPECT_EQ(rows, 11);  // 1M, 2M, ..., 1G
  EXPECT_EQ(moesim("collective --hardware hardware/nodes/dgx-a100.yaml --op broadcast").exit_code, 2);
  EXPECT_EQ(moesim("collective --hardware hardware/nodes/dgx-a100.yaml -b 1X").exit_code, 2);
}

// For the collectives NCCL tunes, a last column names the algorithm and protocol each size runs as;
// an all-to-all (per-peer send/recv) has none.
TEST_F(NetworkCli, CollectiveSaysWhichAlgorithmAndProtocolNcclChose) {
  const Outcome r = moesim("collective --hardware hardware/nodes/hgx-h100.yaml --op all-reduce -b 1K -e 1G -f 32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("#wrong   nccl chose\n"), std::string::npos) << r.out;
  std::map<long long, std::string> chose;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    long long size = 0;
    std::string skip, last;
    f >> size;
    for (int i = 0; i < 8; ++i) f >> skip;
    f >> last;
    chose[size] = last;
  }
  EXPECT_EQ(chose[1024], "ring/ll") << r.out;
  EXPECT_EQ(chose[33554432], "ring/ll128") << r.out;
  EXPECT_EQ(chose[1073741824], "ring/simple") << r.out;
  const Outcome two = moesim("collective --hardware hardware/clusters/dgx-a100-2node.yaml --op all-reduce -b 1K -e 1K");
  EXPECT_NE(two.out.find("N/A      tree/ll\n"), std::string::npos) << two.out;
  const Outcome gather = moesim("collective --hardware hardware/nodes/hgx-h100.yaml --op all-gather -b 1G -e 1G");
  EXPECT_NE(gather.out.find("N/A  ring/simple\n"), std::string::npos) << gather.out;
  const Outcome one = moesim("collective --hardware hardware/nodes/hgx-h100.yaml --op reduce-scatter --ranks 1 -b 1M -e 1M");
  EXPECT_NE(one.out.find("N/A            -\n"), std::string::npos) << one.out;  // no network crossed
  const Outcome a2a = moesim("collective --hardware hardware/nodes/hgx-h100.yaml --op all-to-all -b 1M -e 1M");
  EXPECT_EQ(a2a.out.find("nccl chose"), std::string::npos) << a2a.out;
}

TEST_F(NetworkCli, TheH100ClusterPresetsNicsSetItsAllToAll) {
  // 4 HGX H100 with a 400 Gb/s NDR NIC per GPU (efficiency 0.97: 48.5 GB/s): 64 MiB per rank over
  // 32 ranks is 2 MiB per peer, 24 of them on other nodes, 24 x 2 MiB / 48.5 GB/s in both models
  // (the rails are non-blocking, and NVLink's 7 peers take far less), after NCCL's 8.4 us and 31
  // rounds of peers, each with a pair across nodes (5 us).
  const double want_us = 8.4 + 31 * 5.0 + 24 * 2097152.0 / 48.5e3;
  char want[32];
  std::snprintf(want, sizeof want, "%.2f", want_us);
  for (const char* network : {"alpha-beta", "flow"}) {
    const Outcome r = moesim(std::string("collective --hardware hardware/clusters/h100-4x-hgx-ndr.yaml -b 64M -e 64M --network ") +
                             network);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(want), std::string::npos) << network << "\n" << r.out << " wants " << want;
  }
}

}  // namespace

namespace {

TEST_F(NetworkCli, RoutingReportsImbalanceAndRejectsBadValues) {
  const std::string base = "simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml "
                            "--tokens 4096 --chunks 2";
  const Outcome uniform = moesim(base + " --json " + (dir_ / "u.json").string());
  ASSERT_EQ(uniform.exit_code, 0) << uniform.err;
  EXPECT_NE(uniform.out.find("# routing   uniform (every expert padded to capacity C)"), std::string::npos) << uniform.out;
  const Outcome zipf = moesim(base + " --routing zipf:1.2 --json " + (dir_ / "z.json").string());
  ASSERT_EQ(zipf.exit_code, 0) << zipf.err;
  EXPECT_NE(zipf.out.find("# routing   zipf:1.2 (all-to-allv of the routed rows): tokens per expert max/mean "),
            std::string::npos)
      << zipf.out;
  EXPECT_NE(zipf.out.find("(the slowest of the simulated ranks)"), std::string::npos);
  const std::string json = slurp(dir_ / "z.json");
  EXPECT_NE(json.find("\"routing\": \"zipf:1.2\""), std::string::npos);
  EXPECT_NE(json.find("\"expert_imbalance\": "), std::string::npos);
  EXPECT_NE(json.find("\"dropped_fraction\": "), std::string::npos);
  EXPECT_NE(json.find("\"balanced\": false"), std::string::npos);

  const Outcome typo = moesim(base + " --routing zipf");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("--routing: routing 'zipf' needs an exponent"), std::string::npos) << typo.err;
  EXPECT_EQ(moesim(base + " --routing poisson").exit_code, 2);
  std::ofstream(dir_ / "bad.csv") << "# one row for every rank\n1,2,3\n";
  const Outcome bad = moesim(base + " --routing matrix:" + (dir_ / "bad.csv").string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad.csv:2:1: routing matrix row has 3 columns; the model has 64 experts"), std::string::npos)
      << bad.err;
  // A run file's matrix path is relative to the run file.
  std::string row;
  for (int e = 0; e < 64; ++e) row += (e ? "," : "") + std::string(e < 8 ? "3" : "1");
  std::ofstream(dir_ / "hot.csv") << row << "\n";
  std::ofstream(dir_ / "run.yaml") << "schema_version: 1\nkind: run\nmodel: " << MOESIM_SOURCE_DIR
                                   << "/models/moe-gpt-s-64e.yaml\nhardware: " << MOESIM_SOURCE_DIR
                                   << "/hardware/clusters/dgx-a100-2node.yaml\ntokens_per_gpu: 4096\nrouting: matrix:hot.csv\n";
  const Outcome file = moesim("simulate --run " + (dir_ / "run.yaml").string());
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_NE(file.out.find("# routing   matrix:" + (dir_ / "hot.csv").string()), std::string::npos) << file.out;
  // plan takes the same option.
  const std::string plan = "plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml "
                           "--tokens 4096 -n 1,2 --strategies none";
  const Outcome planned = moesim(plan + " --routing zipf:1.2");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  EXPECT_NE(planned.out.find("routing zipf:1.2"), std::string::npos) << planned.out;
  EXPECT_EQ(moesim(plan + " --routing zipf:-2").exit_code, 2);
}

}  // namespace
