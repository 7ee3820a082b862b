// `moesim simulate` with DeepSpeed-TED's layout: --tp, --no-dtd, --grad-sync, --zero, their run-file
// keys, what the summary, the JSON and the trace say about them, and their bad values (exit 2).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

const std::string kTed =
    "simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
    "--tokens 4096 --chunks 4";

TEST_F(Cli, TensorParallelLayoutInTheSummaryAndJson) {
  const fs::path j = dir_ / "ted.json";
  Result r = run(kTed + " --tp 8 --network alpha-beta --json " + j.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# layout    tp 8 x ep 8 x dp 1 = 64 GPUs; experts 1/8 per rank (TED), duplicate token "
                       "dropping on; a tensor-parallel group shares its B tokens: global batch 8 x B = 32768 tokens"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gradient all-reduces not simulated (--grad-sync)"), std::string::npos) << r.out;
  for (const char* stage : {"fwd.tp_gather", "fwd.tp_reduce", "bwd.tp_gather", "bwd.tp_reduce"})
    EXPECT_NE(r.out.find(stage), std::string::npos) << stage;
  const auto report = nlohmann::json::parse(read_file(j));
  EXPECT_EQ(report["config"]["run"]["tp_size"], 8);
  EXPECT_EQ(report["config"]["run"]["ep_size"], 8);
  EXPECT_EQ(report["config"]["run"]["drop_duplicate_tokens"], true);
  EXPECT_EQ(report["config"]["run"]["grad_sync"], false);
  EXPECT_EQ(report["config"]["derived"]["dp_size"], 1);
  EXPECT_EQ(report["config"]["derived"]["global_tokens"], 32768);
  EXPECT_EQ(report["config"]["derived"]["layout"], "tp 8 x ep 8 x dp 1 = 64 GPUs");
  EXPECT_EQ(report["config"]["derived"]["a2a_bytes_per_peer"], 49152);

  // Every slot of C = 76 is kept: 4 chunks of 19, each tp rank sending ceil(19 / 8) = 3 slots per
  // (expert, source) (8 local experts x 3 x 768 x 4 B); uneven chunks are listed.
  const fs::path model = write("f12.yaml", "schema_version: 1\nkind: model\nname: f12\nd_model: 768\nd_ffn: 3072\n"
                                          "num_experts: 64\ntop_k: 1\ncapacity_factor: 1.2\ndtype: fp32\nactivation: gelu\nnum_layers: 1\n");
  Result whole = run("simulate --model " + model.string() +
                       " --hardware hardware/clusters/adira-8x-dgx-a100.yaml --tokens 4096 --chunks 4 --tp 8");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_NE(whole.out.find("capacity C=76 rows/expert/rank, 1216 rows/chunk, all-to-all 73728 B per peer per chunk\n"),
            std::string::npos)
      << whole.out;
  Result uneven = run("simulate --model " + model.string() +
                      " --hardware hardware/clusters/adira-8x-dgx-a100.yaml --tokens 4096 --chunks 3 --tp 8");
  ASSERT_EQ(uneven.exit_code, 0) << uneven.err;
  EXPECT_NE(uneven.out.find("capacity C=76 rows/expert/rank in chunks of 1 x 26 + 2 x 25, 1664 rows/chunk, "
                            "all-to-all 98304 B per peer per chunk (the largest chunk)"),
            std::string::npos)
      << uneven.out;

  Result plain = run(kTed + " --tp 8 --no-dtd --network alpha-beta");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("duplicate token dropping off"), std::string::npos);
  EXPECT_NE(plain.out.find("all-to-all 393216 B per peer per chunk"), std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.find("tp_gather"), std::string::npos);
}

TEST_F(Cli, GradientSyncRunsOnItsOwnStreamAndZeroOneShrinksTheStates) {
  const fs::path trace = dir_ / "trace.json";
  Result r = run(kTed + " --ep 8 --grad-sync --zero 1 --trace " + trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# layout    tp 1 x ep 8 x dp 8 = 64 GPUs; gradient all-reduces simulated (comm.grad); ZeRO-1"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("bwd.grad_sync"), std::string::npos) << r.out;
  EXPECT_NE(read_file(trace).find("comm.grad"), std::string::npos);
  const auto states = [](const std::string& out) {
    const auto at = out.find("model_states");
    return std::stod(out.substr(at + 12, out.find("GiB", at) - at - 12));
  };
  Result whole = run(kTed + " --ep 8");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_LT(states(r.out), states(whole.out));
}

TEST_F(Cli, RunFileKeysForTheLayout) {
  const fs::path file = write("ted.yaml",
                              "schema_version: 1\nkind: run\nmodel: " + std::string(MOESIM_SOURCE_DIR) +
                                  "/models/moe-gpt-s-64e.yaml\nhardware: " + std::string(MOESIM_SOURCE_DIR) +
                                  "/hardware/clusters/adira-8x-dgx-a100.yaml\ntokens_per_gpu: 4096\nnum_chunks: 2\n"
                                  "tp_size: 4\nep_size: 4\ndrop_duplicate_tokens: false\ngrad_sync: true\n"
                                  "zero_stage: 1\nnetwork: alpha-beta\n");
  const fs::path j = dir_ / "r.json";
  Result r = run("simulate --run " + file.string() + " --json " + j.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = nlohmann::json::parse(read_file(j));
  EXPECT_EQ(report["config"]["run"]["tp_size"], 4);
  EXPECT_EQ(report["config"]["run"]["drop_duplicate_tokens"], false);
  EXPECT_EQ(report["config"]["run"]["grad_sync"], true);
  EXPECT_EQ(report["config"]["run"]["zero_stage"], 1);
  EXPECT_EQ(report["config"]["derived"]["dp_size"], 4);
  // Flags override the file.
  ASSERT_EQ(run("simulate --run " + file.string() + " --tp 2 --zero 0 --json " + j.string()).exit_code, 0);
  report = nlohmann::json::parse(read_file(j));
  EXPECT_EQ(report["config"]["run"]["tp_size"], 2);
  EXPECT_EQ(report["config"]["run"]["zero_stage"], 0);
}

TEST_F(Cli, BadLayoutsExitTwoNamingTheRule) {
  struct Case {
    std::string args;
    std::string expect;
  };
  const fs::path bad_key =
      write("bad.yaml", "schema_version: 1\nkind: run\ntokens_per_gpu: 4096\ntp_size: 0\n");
  const fs::path bad_bool =
      write("bool.yaml", "schema_version: 1\nkind: run\ntokens_per_gpu: 4096\ngrad_sync: maybe\n");
  const fs::path bad_zero =
      write("zero.yaml", "schema_version: 1\nkind: run\ntokens_per_gpu: 4096\nzero_stage: 3\n");
  const std::string files = " --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml";
  const std::vector<Case> cases = {
      {kTed + " --tp 3", "tp_size 3 must divide the cluster's GPU count 64"},
      {kTed + " --tp 0", "error: --tp: 0 is outside [1, 16777216]"},
      {kTed + " --tp 4 --ep 32", "tp_size x ep_size = 4 x 32 must divide"},
      {kTed + " --zero 2", "error: --zero: must be in [0, 1], found 2"},
      {kTed + " --no-dtd", "--no-dtd turns off duplicate token dropping, which only exists with --tp > 1"},
      {kTed + " --tp 2 --routing zipf:1.2", "imbalanced routing is simulated for expert parallelism only"},
      {kTed + " --tp 2 --loopback --ep 8", "runs expert parallelism only"},
      {"simulate" + files + " --tokens 4096 --tp 8 --chunks 65", "= 64 is less than num_chunks n = 65"},
      {"simulate --run " + bad_key.string() + files, bad_key.string() + ":4:"},
      {"simulate --run " + bad_bool.string() + files, bad_bool.string() + ":4:"},
      {"simulate --run " + bad_zero.string() + files, bad_zero.string() + ":4:"},
      {kTed + " --checkpoint some", "--checkpoint: unknown value 'some'; valid values: none, full, cac"},
      {kTed + " --checkpoint cac --strategy s2", "use strategy none with it (got s2)"},
      {kTed + " --tp 2 --a2a 2dh", "the 2DH all-to-all (--a2a 2dh) needs expert-parallel groups of whole nodes"},
  };
  for (const Case& c : cases) {
    Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
}

TEST_F(Cli, CommunicationAwareCheckpointingSavesTwoAllToAllsPerLayer) {
  const fs::path full = dir_ / "full.json";
  const fs::path cac = dir_ / "cac.json";
  Result f = run(kTed + " --layers 2 --checkpoint full --json " + full.string());
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.out.find("checkpoint=full (each layer's forward re-run before its backward)"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("bwd.redispatch"), std::string::npos);
  EXPECT_NE(f.out.find("bwd.recombine"), std::string::npos);
  Result c = run(kTed + " --layers 2 --checkpoint cac --json " + cac.string());
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.out.find("bwd.redispatch"), std::string::npos);
  const auto count_a2a = [](const fs::path& p) {
    int n = 0;
    const nlohmann::json report = nlohmann::json::parse(read_file(p));
    for (const auto& t : report["tasks"])
      if (t["rank"] == 0 && t["kind"] == "collective") ++n;
    return n;
  };
  EXPECT_EQ(count_a2a(full), 2 * 6 * 4);  // 2 layers, 6 all-to-alls, 4 chunks
  EXPECT_EQ(count_a2a(cac), 2 * 4 * 4);
  EXPECT_EQ(nlohmann::json::parse(read_file(cac))["config"]["run"]["checkpoint"], "cac");
}

// Virtual ranks share one GPU, those of every data-parallel replica too: gradient sync with two
// replicas of ep 4 on a loopback node of 8 simulates all 8 without being asked.
TEST_F(Cli, GradientSyncOnALoopbackNodeSimulatesEveryReplica) {
  Result r = run("simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/nodes/h100-loopback-8.yaml "
                 "--tokens 1024 --ep 4 --grad-sync --timing");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("on 8 simulated rank(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("bwd.grad_sync"), std::string::npos);
}

TEST_F(Cli, TheBundledTedExampleRuns) {
  Result r = run("simulate --run examples/ted-adira.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("TED-GPT-6.7B-16E"), std::string::npos);
  EXPECT_NE(r.out.find("# layout    tp 4 x ep 8 x dp 2 = 64 GPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoint=cac"), std::string::npos);
  EXPECT_NE(r.out.find("bwd.grad_sync"), std::string::npos);
  EXPECT_NE(r.out.find("fits in"), std::string::npos);
}

TEST_F(Cli, TensorParallelGraphExportsAndChecks) {
  const fs::path g = dir_ / "g.json";
  Result r = run("graph export --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
                 "--tokens 4096 --chunks 2 --tp 2 --ep 4 --grad-sync --strategy s4 -o " + g.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Result check = run("graph check " + g.string());
  ASSERT_EQ(check.exit_code, 0) << check.err;
  // The flow model (the preset's topology) simulates the replica's tp x ep = 8 ranks of the 64 that
  // the gradient all-reduces span.
  EXPECT_NE(check.out.find("8 simulated rank(s) of 64, acyclic"), std::string::npos) << check.out;
}

}  // namespace
