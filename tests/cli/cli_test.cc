// End-to-end tests of the `moesim` binary: exit codes, outputs, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

const std::string kExample =
    "simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
    "--tokens 4096 --chunks 4";

std::string small_model(const std::string& experts, const std::string& top_k) {
  return "schema_version: 1\nkind: model\nname: tiny\nd_model: 64\nd_ffn: 256\nnum_experts: " + experts +
         "\ntop_k: " + top_k + "\ncapacity_factor: 1.0\ndtype: fp32\nactivation: gelu\nnum_layers: 1\n";
}

TEST_F(Cli, HelpAndVersionExitZero) {
  Result h = run("--help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("simulate"), std::string::npos);
  Result sh = run("simulate --help");
  EXPECT_EQ(sh.exit_code, 0);
  EXPECT_NE(sh.out.find("--chunks"), std::string::npos);
  Result v = run("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("moesim ", 0), 0u);
}

TEST_F(Cli, SimulatePrintsSummary) {
  Result r = run(kExample);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# moesim"), std::string::npos);
  EXPECT_NE(r.out.find("step time"), std::string::npos);
  EXPECT_NE(r.out.find("fwd.dispatch"), std::string::npos);
  EXPECT_NE(r.out.find("overlap achieved"), std::string::npos);
}

TEST_F(Cli, JsonReportHasTheRequiredKeysAndIsDeterministic) {
  const fs::path a = dir_ / "a.json";
  const fs::path b = dir_ / "b.json";
  ASSERT_EQ(run(kExample + " --json " + a.string()).exit_code, 0);
  ASSERT_EQ(run(kExample + " --json " + b.string()).exit_code, 0);
  const std::string text = read_file(a);
  EXPECT_EQ(text, read_file(b));
  const auto j = nlohmann::json::parse(text);
  for (const char* key : {"step_time_us", "forward_us", "backward_us", "stages", "config", "tasks"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GT(j["step_time_us"].get<double>(), 0.0);
  EXPECT_LE(j["forward_us"].get<double>(), j["step_time_us"].get<double>());
  ASSERT_TRUE(j["stages"].contains("fwd.dispatch"));
  EXPECT_TRUE(j["stages"]["fwd.dispatch"].contains("busy_us"));
  EXPECT_TRUE(j["stages"]["fwd.dispatch"].contains("exposed_us"));
  EXPECT_EQ(j["config"]["run"]["num_chunks"], 4);
  EXPECT_EQ(j["config"]["model"]["d_model"], 768);
  ASSERT_FALSE(j["tasks"].empty());
  for (const auto& t : j["tasks"]) {
    for (const char* key : {"id", "rank", "stream", "start_us", "end_us"}) EXPECT_TRUE(t.contains(key));
    EXPECT_LE(t["start_us"].get<double>(), t["end_us"].get<double>());
  }
}

TEST_F(Cli, TraceHasNamedTracksPerRankAndStream) {
  const fs::path t = dir_ / "trace.json";
  ASSERT_EQ(run(kExample + " --trace " + t.string()).exit_code, 0);
  const auto j = nlohmann::json::parse(read_file(t));
  bool process_named = false, compute_named = false, has_slice = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") process_named = true;
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "compute") compute_named = true;
    if (e["ph"] == "X") {
      has_slice = true;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
  }
  EXPECT_TRUE(process_named);
  EXPECT_TRUE(compute_named);
  EXPECT_TRUE(has_slice);
}

TEST_F(Cli, TimingFlagReportsPhases) {
  Result r = run(kExample + " --timing");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("timing: simulate"), std::string::npos);
  EXPECT_NE(r.err.find("timing: total"), std::string::npos);
}

TEST_F(Cli, GraphWithACycleIsRejectedWithThePath) {
  const fs::path g = dir_ / "g.json";
  ASSERT_EQ(run("graph export --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
                "--tokens 4096 --chunks 1 -o " + g.string())
                .exit_code,
            0);
  auto j = nlohmann::json::parse(read_file(g));
  const int last = static_cast<int>(j["tasks"].size()) - 1;
  j["edges"].push_back({last, 0, "data"});
  const fs::path bad = write("cycle.json", j.dump());
  Result c = run("graph check " + bad.string());
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("cycle"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find(" -> "), std::string::npos) << c.err;
}

// graph check proves the exported operand bindings ordered; without the reuse edges an s1 graph
// overwrites T_DI slots its offload copies still read.
TEST_F(Cli, GraphExportThenCheckAndWithoutTheReuseEdges) {
  const fs::path g = dir_ / "g.json";
  ASSERT_EQ(run("graph export --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
                "--tokens 4096 --chunks 4 --strategy s1 -o " + g.string())
                .exit_code,
            0);
  Result c = run("graph check " + g.string());
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("acyclic, "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(" operand accesses ordered\n"), std::string::npos) << c.out;
  auto j = nlohmann::json::parse(read_file(g));
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& e : j["edges"])
    if (e[2] != "reuse") kept.push_back(e);
  ASSERT_LT(kept.size(), j["edges"].size());
  j["edges"] = kept;
  c = run("graph check " + write("racy.json", j.dump()).string());
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("racy.json: operand accesses no path of the graph orders"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("writes 'L0.T_DI.slot"), std::string::npos) << c.err;
}

// A device or a FIFO given as the graph used to be read without end, into unbounded memory.
TEST_F(Cli, GraphCheckRefusesWhatIsNotAFile) {
  Result c = run("graph check /dev/zero");
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("'/dev/zero' is not a regular file"), std::string::npos) << c.err;
  c = run("graph check " + (dir_ / "missing.json").string());
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("cannot open graph file"), std::string::npos) << c.err;
}

TEST_F(Cli, RunFileSuppliesOptionsAndFlagsOverrideIt) {
  const fs::path a = dir_ / "a.json";
  ASSERT_EQ(run("simulate --run examples/quickstart.yaml --chunks 2 --json " + a.string()).exit_code, 0);
  const auto j = nlohmann::json::parse(read_file(a));
  EXPECT_EQ(j["config"]["run"]["num_chunks"], 2);        // the flag wins
  EXPECT_EQ(j["config"]["run"]["tokens_per_gpu"], 4096);  // from the file
  EXPECT_EQ(j["config"]["model"]["name"], "MoE-GPT-S-64E");
  const fs::path bad = write("run.yaml", "schema_version: 1\nkind: run\ntokens_per_gpu: 4096\nnum_chunkz: 2\n");
  Result r = run("simulate --run " + bad.string() + " --model models/moe-gpt-s-64e.yaml "
                 "--hardware hardware/clusters/adira-8x-dgx-a100.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(bad.string() + ":4:1:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("num_chunks"), std::string::npos) << r.err;
}

// Chunk alignment from a run file or --chunk-align: the summary and the JSON list the sizes (C =
// 64 for MoE-GPT-S-64E at 4,096 tokens: 4 blocks of 16 over 3 chunks are 32, 16 and 16).
TEST_F(Cli, ChunkAlignmentComesFromTheRunFileOrTheFlag) {
  const std::string files = " --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml";
  const fs::path aligned = write("aligned.yaml", "schema_version: 1\nkind: run\ntokens_per_gpu: 4096\nnum_chunks: 3\n"
                                                 "chunk_alignment: 16\n");
  Result r = run("simulate --run " + aligned.string() + files + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["run"]["chunk_alignment"], 16);
  EXPECT_EQ(j["config"]["derived"]["chunk_capacities"], nlohmann::json::parse("[32, 16, 16]"));
  EXPECT_NE(r.err.find("capacity C=64 rows/expert/rank in chunks of 1 x 32 + 2 x 16"), std::string::npos) << r.err;
  r = run("simulate --run " + aligned.string() + files + " --chunk-align 1 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["derived"]["chunk_capacities"], nlohmann::json::parse("[22, 21, 21]"));
  r = run("simulate --tokens 4096 --chunks 5 --chunk-align 16" + files);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("capacity C = 64 holds fewer than num_chunks n = 5 blocks of chunk_alignment 16 slots"),
            std::string::npos)
      << r.err;
  r = run("simulate --tokens 4096 --chunk-align 0" + files);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: --chunk-align: 0 is outside [1, 1048576]"), std::string::npos) << r.err;
}

TEST_F(Cli, JsonToStdoutMovesTheSummaryToStderr) {
  Result r = run(kExample + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out.substr(0, 200);
  EXPECT_NE(r.err.find("step time"), std::string::npos);
  EXPECT_EQ(run(kExample + " --json - --trace -").exit_code, 2);
}

TEST_F(Cli, TimelineToStdoutAndOneStdoutOutputAtMost) {
  Result r = run(kExample + " --timeline -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("# moesim timeline v1\n", 0), 0u) << r.out.substr(0, 200);
  EXPECT_NE(r.out.find("\nstep_ns 6176178\n"), std::string::npos);  // the summary's 6176.178 us
  EXPECT_NE(r.out.find("\ntask 0 "), std::string::npos);
  EXPECT_NE(r.err.find("step time"), std::string::npos);  // the summary moved to stderr
  Result both = run(kExample + " --timeline - --trace -");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("error: --trace and --timeline both write to stdout ('-')"), std::string::npos) << both.err;
}

TEST_F(Cli, ExtremeValuesAreInputErrorsNotCrashes) {
  // An efficiency so small that durations leave 64-bit time.
  const std::string gpu = read_file(fs::path(MOESIM_SOURCE_DIR) / "hardware/gpus/a100-sxm4-40gb.yaml");
  std::string slow = gpu;
  const auto pos = slow.find("hbm_efficiency:");
  ASSERT_NE(pos, std::string::npos);
  slow.replace(pos, slow.find('\n', pos) - pos, "hbm_efficiency: 1e-300");
  const fs::path g = write("slow-gpu.yaml", slow);
  Result r = run("simulate --model models/moe-gpt-s-64e.yaml --hardware " + g.string() + " --ep 1 --tokens 4096");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("not a usable time"), std::string::npos) << r.err;
  // A graph too large to build is refused before it is built (a model that has 100000 layers).
  std::string deep = read_file(fs::path(MOESIM_SOURCE_DIR) / "models/moe-gpt-s-64e.yaml");
  const auto layers_key = deep.find("num_layers: 12");
  ASSERT_NE(layers_key, std::string::npos);
  deep.replace(layers_key, 14, "num_layers: 100000");
  const fs::path deep_model = write("deep.yaml", deep);
  Result big = run("simulate --model " + deep_model.string() +
                   " --hardware hardware/clusters/adira-8x-dgx-a100.yaml --tokens 4096 --layers 100000 --chunks 64 "
                   "--all-ranks");
  EXPECT_EQ(big.exit_code, 2) << big.err;
  EXPECT_NE(big.err.find("limit"), std::string::npos) << big.err;
}

TEST_F(Cli, MoreLayersThanTheModelHasAreRefusedAndTheVerdictCountsEveryLayer) {
  Result r = run(kExample + " --layers 13");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("models/moe-gpt-s-64e.yaml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the run simulates 13 MoE layers but the model has num_layers = 12"), std::string::npos)
      << r.err;
  // DeepSeek-V3's 61 layers on 32 H100s: one layer fits in 80 GiB, the model does not.
  Result ds = run("simulate --model models/deepseek-v3.yaml --hardware hardware/clusters/h100-4x-hgx-ndr.yaml "
                  "--tokens 4096 --json -");
  ASSERT_EQ(ds.exit_code, 0) << ds.err;
  const auto mem = nlohmann::json::parse(ds.out)["memory"];
  EXPECT_LT(mem["peak_bytes"].get<std::int64_t>(), mem["capacity_bytes"].get<std::int64_t>());
  EXPECT_EQ(mem["whole_model"]["layers"], 61);
  EXPECT_EQ(mem["whole_model"]["peak_bytes"].get<std::int64_t>(),
            mem["peak_bytes"].get<std::int64_t>() +
                60 * (mem["whole_model"]["layer_model_states_bytes"].get<std::int64_t>() +
                      mem["whole_model"]["layer_kept_activations_bytes"].get<std::int64_t>()));
  EXPECT_FALSE(mem["fits"].get<bool>());
  EXPECT_NE(ds.err.find("61 layers: + 60 x ("), std::string::npos) << ds.err;
  EXPECT_NE(ds.err.find("does not fit: needs"), std::string::npos) << ds.err;
}

TEST_F(Cli, BadInputExitsTwoWithAClearMessage) {
  const std::string hw = " --hardware hardware/clusters/adira-8x-dgx-a100.yaml";
  struct Case {
    std::string args;
    std::string expect;
  };
  const fs::path typo = write("typo.yaml", small_model("64", "1") + "d_modle: 3\n");
  const fs::path indivisible = write("indiv.yaml", small_model("6", "1"));
  const fs::path topk = write("topk.yaml", small_model("8", "9"));
  const std::vector<Case> cases = {
      {kExample + " --order nonsense", "mpipemoe"},
      {kExample + " --chunks 0", "--chunks"},
      {"simulate --model models/moe-gpt-s-64e.yaml" + hw + " --tokens -5", "--tokens"},
      {"simulate --model models/does-not-exist.yaml" + hw + " --tokens 4096", "does-not-exist"},
      {"simulate --model " + typo.string() + hw + " --tokens 4096", "d_modle"},
      {"simulate --model " + indivisible.string() + hw + " --tokens 4096", "divisible"},
      {"simulate --model " + topk.string() + hw + " --tokens 4096", "top_k"},
      {"simulate --model models/moe-gpt-s-64e.yaml" + hw + " --tokens 4096 --chunks 128", "128"},
      {"simulate --hardware hardware/clusters/adira-8x-dgx-a100.yaml --tokens 4096", "--model"},
      {"frobnicate", "frobnicate"},
      {kExample + " --strategy s9", "s4"},
      {kExample + " --slots 3", "--slots"},
      {kExample + " --optimizer lion", "adam"},
  };
  for (const Case& c : cases) {
    Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
  // A key typo names the file, line and column (the typo is on line 12 of the file).
  Result r = run("simulate --model " + typo.string() + hw + " --tokens 4096");
  EXPECT_NE(r.err.find(typo.string() + ":12:1:"), std::string::npos) << r.err;
}

}  // namespace

namespace {

using namespace moesim::cli_test;

// A calibration of the example's GPU whose tf32 table covers only part of the example's GEMMs.
const std::string kA100Calibration =
    "schema_version: 1\nkind: calibration\nname: test\ngpu: A100-SXM4-40GB\ndevice: test\n"
    "kernel_launch_overhead: 3 us\n"
    "gemm:\n  tf32:\n    m: [64, 512]\n    n: [768, 3072]\n    k: [768, 3072]\n"
    "    time_us: [[20, 60], [60, 200], [90, 330], [330, 1300]]\n";

TEST_F(Cli, CalibrationReplacesTheGemmCurveAndSaysWhereItDoesNotReach) {
  const fs::path cal = write("a100.yaml", kA100Calibration);
  const Result plain = run(kExample + " --json -");
  const Result r = run(kExample + " --calibration " + cal.string() + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The summary (on stderr with --json -) names the calibration and the GEMMs outside its range.
  EXPECT_NE(r.err.find("# calibrated " + cal.string() + " (measured on test); GEMM tables: tf32"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("# warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tf32 GEMM task(s) fall outside the measured range"), std::string::npos) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["config"]["hardware"]["node"]["gpu"]["calibration"]["file"], cal.string());
  EXPECT_EQ(json["config"]["hardware"]["node"]["gpu"]["kernel_launch_ns"], 3000);
  ASSERT_EQ(json["warnings"].size(), 1u);
  EXPECT_NE(json["step_time_us"], nlohmann::json::parse(plain.out)["step_time_us"]);
  EXPECT_EQ(nlohmann::json::parse(plain.out).count("warnings"), 0u);
  // plan: its report names the file, and its simulations and PipeMoE's fitted constants change.
  const std::string plan = "plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
                           "--tokens 4096 --chunks 1,4 --strategies none --method all";
  const Result p = run(plan + " --calibration " + cal.string());
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("# calibrated " + cal.string() + "\n"), std::string::npos) << p.out;
  const auto plan_json = [&](const std::string& extra) { return nlohmann::json::parse(run(plan + extra + " --json -").out); };
  const auto calibrated = plan_json(" --calibration " + cal.string());
  const auto datasheet = plan_json("");
  EXPECT_EQ(calibrated["calibration"], cal.string());
  EXPECT_NE(calibrated["tables"][0]["baseline"]["step_ns"], datasheet["tables"][0]["baseline"]["step_ns"]);
  const auto detail = [](const nlohmann::json& j, const std::string& method) {
    for (const auto& m : j["tables"][0]["methods"])
      if (m["method"] == method) return m["detail"].get<std::string>();
    return std::string("missing");
  };
  EXPECT_NE(detail(calibrated, "pipemoe"), detail(datasheet, "pipemoe"));
  EXPECT_NE(detail(calibrated, "pipemoe"), "missing");
}

// --loopback: the --ep ranks as virtual ranks of one GPU of the hardware, as `moesim run
// --loopback` runs them; the same as the loopback preset, and slower than as many real GPUs.
TEST_F(Cli, LoopbackSimulatesVirtualRanksOnOneGpu) {
  const std::string layer = "simulate --model models/moe-gpt-s-64e.yaml --tokens 2048 --chunks 2 --strategy s1 --json -";
  const Result r = run(layer + " --hardware hardware/nodes/hgx-h100.yaml --ep 8 --loopback");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("8 virtual ranks on one H100-SXM5-80GB"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("one GPU holds"), std::string::npos) << r.err;
  const auto loop = nlohmann::json::parse(r.out);
  EXPECT_TRUE(loop["config"]["hardware"]["node"]["loopback"].get<bool>());
  // The node's GEMM-size interference table is echoed row by row: [outputs_per_sm, factor].
  const auto& gemm_rows = loop["config"]["hardware"]["node"]["interference"]["gemm_with_communication"];
  ASSERT_EQ(gemm_rows.size(), 8u);
  EXPECT_EQ(gemm_rows[4][0], 63550);
  EXPECT_EQ(gemm_rows[4][1], 0.525);
  EXPECT_EQ(loop["memory"]["virtual_ranks"], 8);
  const Result preset = run(layer + " --hardware hardware/nodes/h100-loopback-8.yaml");
  ASSERT_EQ(preset.exit_code, 0) << preset.err;
  EXPECT_EQ(nlohmann::json::parse(preset.out)["step_time_us"], loop["step_time_us"]);
  const Result real = run(layer + " --hardware hardware/nodes/hgx-h100.yaml --ep 8");
  ASSERT_EQ(real.exit_code, 0) << real.err;
  EXPECT_GT(loop["step_time_us"].get<double>(), nlohmann::json::parse(real.out)["step_time_us"].get<double>());

  const Result flow = run(layer + " --hardware hardware/nodes/hgx-h100.yaml --ep 8 --loopback --network flow");
  EXPECT_EQ(flow.exit_code, 2);
  EXPECT_NE(flow.err.find("share one GPU"), std::string::npos) << flow.err;
  const Result pure = run(layer + " --hardware hardware/clusters/pipemoe-alpha-beta.yaml --ep 8 --loopback");
  EXPECT_EQ(pure.exit_code, 2);
  EXPECT_NE(pure.err.find("pure alpha-beta costs"), std::string::npos) << pure.err;
}

TEST_F(Cli, CalibrationOfAnotherGpuIsAnInputError) {
  const fs::path cal = write("a100.yaml", kA100Calibration);
  const Result r = run("simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/valor-4x-v100.yaml "
                       "--tokens 4096 --calibration " + cal.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(cal.string() + ":4:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot be applied to 'V100-SXM2-16GB'"), std::string::npos) << r.err;
  const Result p = run("plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/valor-4x-v100.yaml "
                       "--tokens 4096 --calibration " + cal.string());
  EXPECT_EQ(p.exit_code, 2) << p.out;
}

}  // namespace
