// End-to-end tests of `moesim plan` and `moesim sweep`: outputs, determinism across --jobs, and bad
// grids failing with exit 2 before any work.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;

const std::string kPlan =
    "plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/pipemoe-alpha-beta.yaml --tokens 4096 "
    "--strategies none,s4 --chunks 1-8";

TEST_F(Cli, PlanPrintsARankedTableAndEveryMethod) {
  const Result r = run(kPlan + " --method all");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# moesim"), std::string::npos);
  EXPECT_NE(r.out.find("<- best"), std::string::npos);
  for (const char* m : {"simulate", "pipemoe", "mpipemoe-online", "mpmoe-model"}) {
    EXPECT_NE(r.out.find(std::string("  ") + m), std::string::npos) << m;
  }
  EXPECT_NE(r.out.find("alpha_beta section"), std::string::npos);
  EXPECT_NE(r.out.find("final ranges"), std::string::npos);
}

TEST_F(Cli, PlanJsonMatchesTheTable) {
  const Result r = run(kPlan + " --objective memory --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["objective"], "memory");
  const auto& rows = j["tables"][0]["rows"];
  EXPECT_EQ(rows.size(), 16u);
  // Ranked by the whole model's peak memory among those that fit (not the simulated layer's: a
  // strategy that keeps less for backward saves it in every layer).
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_GE(rows[i]["model_peak_bytes"], rows[i]["peak_bytes"]);
    if (rows[i]["fits"] && rows[i - 1]["fits"]) {
      EXPECT_LE(rows[i - 1]["model_peak_bytes"], rows[i]["model_peak_bytes"]);
    }
  }
  EXPECT_EQ(j["tables"][0]["best"], rows[0]);
  EXPECT_NE(r.err.find("<- best"), std::string::npos);  // the table moved to stderr
}

TEST_F(Cli, PlanFitFindsTheSmallestCluster) {
  const Result r = run(
      "plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml --tokens 4096 "
      "--chunks 1,2,4 --strategies none --fit --max-nodes 4 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fit"]["answer_nodes"], 1);  // GPT-S fits in one DGX A100
  EXPECT_NE(r.err.find("answer: 1 node(s), 8 GPUs"), std::string::npos) << r.err;
}

TEST_F(Cli, PlanBadInputExitsTwo) {
  Result r = run(kPlan + " --objective speed");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("valid: time, forward, memory, balanced"), std::string::npos) << r.err;
  r = run("plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml --tokens 256 "
          "--chunks 1-8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("n = 5"), std::string::npos) << r.err;
}

// --network picks the collective model of every simulated row, with one default (auto: flow on
// hardware with a topology, as simulate); the report names the model it used.
TEST_F(Cli, PlanAndSweepTakeTheNetworkModel) {
  const std::string plan = "plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml "
                           "--tokens 4096 --chunks 1,4 --strategies none --json -";
  std::map<std::string, nlohmann::json> by_model;
  for (const char* network : {"", " --network flow", " --network alpha-beta"}) {
    const Result r = run(plan + network);
    ASSERT_EQ(r.exit_code, 0) << network << r.err;
    by_model[network] = nlohmann::json::parse(r.out);
  }
  EXPECT_EQ(by_model[""]["network"], "flow");
  EXPECT_EQ(by_model[" --network alpha-beta"]["network"], "alpha-beta");
  EXPECT_EQ(by_model[""]["tables"], by_model[" --network flow"]["tables"]);
  EXPECT_NE(by_model[" --network flow"]["tables"][0]["rows"], by_model[" --network alpha-beta"]["tables"][0]["rows"]);
  Result bad = run(plan + " --network fast");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--network: unknown value 'fast'; valid values: auto, alpha-beta, flow"), std::string::npos)
      << bad.err;

  const std::string sweep = "sweep --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml "
                            "--tokens 4096 --chunks 1,4 --json -";
  const Result flow = run(sweep), ab = run(sweep + " --network alpha-beta");
  ASSERT_EQ(flow.exit_code, 0) << flow.err;
  ASSERT_EQ(ab.exit_code, 0) << ab.err;
  const auto fj = nlohmann::json::parse(flow.out), aj = nlohmann::json::parse(ab.out);
  EXPECT_EQ(fj["network"], "auto");
  EXPECT_EQ(aj["network"], "alpha-beta");
  EXPECT_NE(fj["records"], aj["records"]);
  const auto grid_with_network = [&](const std::string& name, const std::string& network) {
    return write(name, "schema_version: 1\nkind: sweep\nmodels: [" + std::string(MOESIM_SOURCE_DIR) +
                           "/models/moe-gpt-s-64e.yaml]\nhardware: [" + MOESIM_SOURCE_DIR +
                           "/hardware/clusters/dgx-a100-2node.yaml]\ntokens: [4096]\nchunks: [1, 4]\n"
                           "strategies: [none]\nnetwork: " + network + "\n");
  };
  const Result from_grid = run("sweep --grid " + grid_with_network("net.yaml", "alpha-beta").string() + " --json -");
  ASSERT_EQ(from_grid.exit_code, 0) << from_grid.err;
  EXPECT_EQ(nlohmann::json::parse(from_grid.out)["records"], aj["records"]);
  const fs::path bad_grid = grid_with_network("badnet.yaml", "ethernet");
  const Result g = run("sweep --grid " + bad_grid.string());
  EXPECT_EQ(g.exit_code, 2);
  EXPECT_NE(g.err.find(bad_grid.string() + ":8:10: network: unknown value 'ethernet'"), std::string::npos) << g.err;
}

const std::string kSweep =
    "sweep --model models/moe-gpt-s-64e.yaml,models/moe-bert-l-64e.yaml --hardware "
    "hardware/clusters/dgx-a100-2node.yaml --gpus 8,16 --tokens 2048,4096 --chunks 1-4 --strategies none,s4";

TEST_F(Cli, SweepCsvIsByteIdenticalAcrossJobs) {
  const fs::path a = dir_ / "j1.csv", b = dir_ / "j2.csv";
  const Result r1 = run(kSweep + " --jobs 1 --csv " + a.string());
  const Result r2 = run(kSweep + " --jobs 2 --csv " + b.string());
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  const std::string csv = read_file(a);
  EXPECT_EQ(csv, read_file(b));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 2 * 2 * 4 * 2);
  EXPECT_EQ(csv.rfind("model,hardware,gpus,tokens,routing,strategy,n,", 0), 0u);
  // Not a terminal: plain progress lines on stderr, nothing on stdout.
  EXPECT_NE(r1.err.find("sweep: 64/64 configurations (100%)"), std::string::npos) << r1.err;
  EXPECT_TRUE(r1.out.empty());
}

TEST_F(Cli, SweepWritesJsonAndSelfContainedHtml) {
  const fs::path json = dir_ / "s.json", html = dir_ / "s.html";
  const Result r = run(kSweep + " --step-target-ms 5 --json " + json.string() + " --html " + html.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(j["records"].size(), 64u);
  EXPECT_EQ(j["step_target_ns"], 5000000);
  const std::string page = read_file(html);
  for (const char* must : {"<svg", "Pareto front", "Best n against token count", "Capacity"}) {
    EXPECT_NE(page.find(must), std::string::npos) << must;
  }
  // One inline script (the plots' filter), nothing fetched from a network or another file.
  EXPECT_EQ(page.find("<script"), page.rfind("<script"));
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  // Every group has its plot: 2 models x 2 GPU counts x 2 token counts.
  const std::string step_plot = "data-plot=\"step-vs-n\"";
  std::size_t plots = 0;
  for (auto at = page.find(step_plot); at != std::string::npos; at = page.find(step_plot, at + 1)) ++plots;
  EXPECT_EQ(plots, j["best_per_group"].size());
  EXPECT_EQ(plots, 8u);
  // The same bytes whatever the number of threads.
  const fs::path html1 = dir_ / "s1.html";
  ASSERT_EQ(run(kSweep + " --step-target-ms 5 --jobs 1 --html " + html1.string()).exit_code, 0);
  EXPECT_EQ(read_file(html1), page);
}

TEST_F(Cli, BadGridsFailBeforeAnyWork) {
  const std::string head = "schema_version: 1\nkind: sweep\nmodels: [" + std::string(MOESIM_SOURCE_DIR) +
                           "/models/moe-gpt-s-64e.yaml]\nhardware: [" + MOESIM_SOURCE_DIR +
                           "/hardware/clusters/dgx-a100-2node.yaml]\n";
  struct Case {
    std::string body;
    std::string expect;
  };
  const Case cases[] = {
      {"tokens: []\nchunks: [1]\nstrategies: [none]\n", "g.yaml:5:9: tokens: the axis 'tokens' is empty"},
      {"tokens: [256]\nchunks: [1, 8]\nstrategies: [none]\n", "g.yaml:6:9: n = 8 is above the capacity C = 4"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nroutng: [uniform]\n", "did you mean 'routing'"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nrouting: [zipf]\n",
       "g.yaml:8:11: routing 'zipf' needs an exponent, e.g. zipf:1.2"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nrouting: [uniform, lognormal]\n",
       "g.yaml:8:20: unknown routing 'lognormal'; valid: uniform, zipf:<s>"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nrouting: [matrix:absent.csv]\n",
       "cannot open routing matrix file"},
      // 2 rows for a 16-rank group: found when the grid is checked, before any configuration runs.
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\nrouting: [matrix:two-rows.csv]\n",
       "two-rows.csv:3: routing matrix has 2 rows; it needs 1 (every rank alike) or 16"},
      {"tokens: [256]\nchunks: [1]\nstrategies: [none]\ngpus: [12]\n", "not a multiple of the 8 GPUs per node"},
  };
  std::string two_rows;
  for (int row = 0; row < 2; ++row) {
    for (int e = 0; e < 64; ++e) two_rows += (e ? "," : "") + std::to_string(e % 3);
    two_rows += "\n";
  }
  write("two-rows.csv", "# tokens per expert\n" + two_rows);
  for (const Case& c : cases) {
    const fs::path grid = write("g.yaml", head + c.body);
    const Result r = run("sweep --grid " + grid.string() + " --csv " + (dir_ / "out.csv").string());
    EXPECT_EQ(r.exit_code, 2) << c.body;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("sweep: "), std::string::npos) << "work started: " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out.csv"));
  }
  const fs::path missing = write("m.yaml", "schema_version: 1\nkind: sweep\nmodels: [nope.yaml]\n");
  const Result r = run("sweep --grid " + missing.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("m.yaml:3:10: models[0]: cannot open model file"), std::string::npos) << r.err;
}

// ---- DeepSpeed-TED layouts in plan and sweep ----

const std::string kPlanTed =
    "plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml --tokens 4096 "
    "--chunks 2 --strategies none";

// The step plan --tp ranks is the step simulate --tp prints, and the report shows the layout.
TEST_F(Cli, PlanWithTensorParallelismSimulatesWhatSimulateDoes) {
  const Result p = run(kPlanTed + " --tp 2 --grad-sync --zero 1 --json -");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto plan = nlohmann::json::parse(p.out);
  EXPECT_EQ(plan["tp_size"], 2);
  EXPECT_EQ(plan["ep_size"], 8);
  EXPECT_EQ(plan["dp_size"], 1);
  EXPECT_EQ(plan["layout"], "tp 2 x ep 8 x dp 1 = 16 GPUs");
  EXPECT_EQ(plan["drop_duplicate_tokens"], true);
  EXPECT_EQ(plan["grad_sync"], true);
  EXPECT_EQ(plan["zero_stage"], 1);
  EXPECT_EQ(plan["tables"][0]["global_tokens"], 8 * 4096);
  EXPECT_NE(p.err.find("# layout    tp 2 x ep 8 x dp 1 = 16 GPUs; experts 1/2 per rank (TED), duplicate token dropping "
                       "on; a tensor-parallel group shares its B tokens: global batch 8 x B; gradient all-reduces "
                       "simulated (comm.grad); ZeRO-1\n"),
            std::string::npos)
      << p.err;
  EXPECT_NE(p.err.find("(16 GPUs, EP 8)"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("tokens per GPU: 4096 (global batch 32768)"), std::string::npos) << p.err;
  const fs::path j = dir_ / "sim.json";
  const Result s = run("simulate --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml "
                       "--tokens 4096 --chunks 2 --tp 2 --grad-sync --zero 1 --json " + j.string());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto sim = nlohmann::json::parse(read_file(j));
  const auto& row = plan["tables"][0]["rows"][0];
  EXPECT_EQ(row["n"], 2);
  EXPECT_DOUBLE_EQ(row["step_ns"].get<double>() / 1e3, sim["step_time_us"].get<double>());
  EXPECT_EQ(row["peak_bytes"], sim["memory"]["peak_bytes"]) << sim["memory"].dump();

  // Without --tp the report keeps its expert-parallel form.
  const Result plain = run(kPlanTed);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("# layout"), std::string::npos);
  EXPECT_NE(plain.out.find("tokens per GPU: 4096   baseline"), std::string::npos) << plain.out;
}

TEST_F(Cli, PlanRefusesTheAnalyticalMethodsWithTensorParallelism) {
  for (const char* method : {"all", "pipemoe", "mpmoe-model"}) {
    const Result r = run(kPlanTed + " --tp 2 --method " + method);
    EXPECT_EQ(r.exit_code, 2) << method;
    EXPECT_EQ(r.err.rfind("error: --tp 2: the method(s) ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("describe expert parallelism only"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the methods that take --tp are simulate and mpipemoe-online"), std::string::npos) << r.err;
  }
  EXPECT_NE(run(kPlanTed + " --tp 2 --method all").err.find("pipemoe and mpmoe-model"), std::string::npos);
  const Result online = run("plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml "
                            "--tokens 2048,4096 --chunks 1,2 --strategies none,s4 --tp 2 --method mpipemoe-online");
  ASSERT_EQ(online.exit_code, 0) << online.err;
  EXPECT_NE(online.out.find("  mpipemoe-online"), std::string::npos) << online.out;
  EXPECT_NE(online.out.find("final ranges"), std::string::npos) << online.out;
}

TEST_F(Cli, PlanBadLayoutFlagsExitTwo) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --tp 0", "error: --tp: 0 is outside [1, 16777216]"},
      {" --tp 3", "tp_size 3 must divide the cluster's GPU count 16"},
      {" --zero 2", "error: --zero: 2 is outside [0, 1]"},
      {" --no-dtd", "error: --no-dtd turns off duplicate token dropping, which only exists with --tp > 1"},
      {" --tp 2 --routing zipf:1.2", "imbalanced routing is simulated for expert parallelism only"},
  };
  for (const auto& [flags, expect] : cases) {
    const Result r = run(kPlanTed + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << flags << "\n" << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << flags << "\n" << r.err;
  }
}

// --fit keeps the expert-parallel group at GPUs / tp, so a node count whose GPUs tp does not
// divide is skipped: one 8-GPU node cannot hold tp 16, two can (with one expert-parallel rank).
TEST_F(Cli, PlanFitSkipsNodeCountsTheTensorParallelDegreeDoesNotDivide) {
  const Result r = run("plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml "
                       "--tokens 2048 --chunks 1 --strategies none --tp 16 --fit --max-nodes 2 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& steps = j["fit"]["steps"];
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0]["valid"], false);
  EXPECT_NE(steps[0]["reason"].get<std::string>().find("tp_size 16 must divide the cluster's GPU count 8"),
            std::string::npos)
      << steps[0].dump();
  EXPECT_EQ(steps[1]["valid"], true);
  EXPECT_EQ(steps[1]["tp_size"], 16);
  EXPECT_EQ(steps[1]["ep_size"], 1);
  EXPECT_EQ(j["fit"]["answer_nodes"], 2);
  EXPECT_NE(r.err.find("2 node(s)    16 GPUs (tp 16 x ep 1): yes"), std::string::npos) << r.err;
}

const std::string kSweepTed =
    "sweep --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/dgx-a100-2node.yaml --chunks 1,2 "
    "--strategies none";

// Activation checkpointing in plan and sweep: every configuration re-runs its layers' forward;
// plan's default strategy set is then none alone, and a strategy with checkpointing is refused.
TEST_F(Cli, PlanAndSweepTakeActivationCheckpointing) {
  const fs::path json = dir_ / "plan.json";
  Result p = run("plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
                 "--tokens 4096 --chunks 1,2 --checkpoint cac --json " + json.string());
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto plan = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(plan["checkpoint"], "cac");
  EXPECT_EQ(plan["strategies"], nlohmann::json::array({"none"}));
  Result bad = run("plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
                   "--tokens 4096 --strategies s1 --checkpoint full");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("use strategy none with it (got s1)"), std::string::npos) << bad.err;
  EXPECT_EQ(run("plan --model models/moe-gpt-s-64e.yaml --hardware hardware/clusters/adira-8x-dgx-a100.yaml "
                "--tokens 4096 --checkpoint half")
                .exit_code,
            2);

  const fs::path csv = dir_ / "s.csv";
  Result s = run(kSweepTed.substr(0, kSweepTed.find(" --strategies")) + " --tokens 2048 --checkpoint full --csv " +
                 csv.string());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const std::string text = read_file(csv);
  EXPECT_NE(text.find(",full,"), std::string::npos) << text;
  const fs::path grid = write("grid.yaml", "schema_version: 1\nkind: sweep\nmodels: [" + std::string(MOESIM_SOURCE_DIR) +
                                               "/models/moe-gpt-s-64e.yaml]\nhardware: [" + MOESIM_SOURCE_DIR +
                                               "/hardware/clusters/dgx-a100-2node.yaml]\ntokens: [2048]\nchunks: [1]\n"
                                               "strategies: [none]\ncheckpoint: sometimes\n");
  Result g = run("sweep --grid " + grid.string());
  EXPECT_EQ(g.exit_code, 2);
  EXPECT_NE(g.err.find(grid.string() + ":8:13: checkpoint: unknown value 'sometimes'"), std::string::npos) << g.err;
}

TEST_F(Cli, SweepOverLayoutsAtOneGlobalBatch) {
  const fs::path csv = dir_ / "ted.csv", json = dir_ / "ted.json", html = dir_ / "ted.html";
  const Result r = run(kSweepTed + " --global-tokens 32768 --tp 1,2,4 --grad-sync --zero 1 --csv " + csv.string() +
                       " --json " + json.string() + " --html " + html.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = read_file(csv);
  EXPECT_EQ(text.rfind("model,hardware,gpus,tokens,routing,strategy,n,step_us,forward_us,backward_us,peak_bytes,"
                       "capacity_bytes,fits,speedup_vs_n1_none,best,expert_imbalance,rank_imbalance,dropped_fraction,"
                       "tp,ep,dp,global_tokens,best_layout,drop_duplicate_tokens,grad_sync,zero_stage,checkpoint,model_peak_bytes\n",
                       0),
            0u)
      << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 3 * 2);
  const auto j = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(j["records"].size(), 6u);
  EXPECT_EQ(j["token_axis"], "global_tokens");
  EXPECT_EQ(j["grad_sync"], true);
  EXPECT_EQ(j["zero_stage"], 1);
  for (std::size_t i = 0; i < 6; ++i) {
    const auto& rec = j["records"][i];
    const int tp = 1 << (i / 2);  // tp inside the token axis, n innermost
    EXPECT_EQ(rec["tp"], tp) << i;
    EXPECT_EQ(rec["ep"], 16 / tp) << i;
    EXPECT_EQ(rec["dp"], 1) << i;
    EXPECT_EQ(rec["global_tokens"], 32768) << i;
    EXPECT_EQ(rec["tokens"], 32768 / (16 / tp)) << i;
    // The CSV row says the same.
    const std::string row_start = "MoE-GPT-S-64E,DGX-A100-2node," + std::to_string(16) + "," +
                                  std::to_string(32768 / (16 / tp)) + ",uniform,none," + std::to_string(1 + i % 2) +
                                  ",";
    EXPECT_NE(text.find(row_start), std::string::npos) << row_start << "\n" << text;
  }
  // One batch, three layouts; its fastest is one of their picks and the only best_layout row.
  const auto& batch = j["best_layout_per_batch"];
  ASSERT_EQ(batch.size(), 1u);
  ASSERT_EQ(batch[0]["layouts"].size(), 3u);
  const int best = batch[0]["best_record"].get<int>();
  bool among = false;
  for (const auto& layout : batch[0]["layouts"]) {
    ASSERT_FALSE(layout["best_record"].is_null()) << layout.dump();  // 16 A100s hold every layout
    among = among || layout["best_record"] == best;
    EXPECT_LE(j["records"][best]["step_ns"], j["records"][layout["best_record"].get<int>()]["step_ns"]);
  }
  EXPECT_TRUE(among);
  // The CSV's best_layout column (the 23rd) marks that record alone.
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);  // the header
  for (int i = 0; std::getline(lines, line); ++i) {
    std::istringstream fields(line);
    std::string field;
    for (int column = 0; column < 23; ++column) std::getline(fields, field, ',');
    EXPECT_EQ(field, i == best ? "1" : "0") << line;
  }
  const std::string page = read_file(html);
  EXPECT_NE(page.find("Layouts at one global batch"), std::string::npos);
  EXPECT_NE(page.find("Gradient all-reduces simulated; ZeRO stage 1; activation checkpointing none."), std::string::npos);
}

TEST_F(Cli, BadLayoutSweepsExitTwoBeforeAnyWork) {
  struct Case {
    std::string args;
    std::string expect;
  };
  const std::string head = "schema_version: 1\nkind: sweep\nmodels: [" + std::string(MOESIM_SOURCE_DIR) +
                           "/models/moe-gpt-s-64e.yaml]\nhardware: [" + MOESIM_SOURCE_DIR +
                           "/hardware/clusters/dgx-a100-2node.yaml]\nchunks: [1]\nstrategies: [none]\n";
  const fs::path bad_tp = write("tp.yaml", head + "tokens: [4096]\ntp: [1, 3]\n");
  const fs::path both = write("both.yaml", head + "tokens: [4096]\nglobal_tokens: [65536]\n");
  const fs::path odd = write("odd.yaml", head + "global_tokens: [65535]\n");
  const std::vector<Case> cases = {
      {kSweepTed + " --tokens 4096 --tp 3", "error: --tp 3 (model MoE-GPT-S-64E, hardware DGX-A100-2node at 16 GPUs"},
      {kSweepTed + " --tokens 4096 --tp 0", "error: --tp: 0 is outside [1, "},
      {kSweepTed + " --tokens 4096 --global-tokens 65536", "give either --tokens (per GPU) or --global-tokens"},
      {kSweepTed + " --global-tokens 65540 --tp 2",
       "error: --global-tokens 65540 does not divide evenly over the 8 tensor-parallel groups (GPUs / tp = 16 / 2)"},
      {kSweepTed + " --tokens 4096 --zero 2", "error: --zero: 2 is outside [0, 1]"},
      {kSweepTed + " --tokens 4096 --no-dtd", "error: --no-dtd turns off duplicate token dropping"},
      {kSweepTed, "--tokens (or --global-tokens)"},
      {"sweep --grid " + bad_tp.string(),
       "error: " + bad_tp.string() + ":8:5: tp = 3 (model MoE-GPT-S-64E, hardware DGX-A100-2node at 16 GPUs"},
      {"sweep --grid " + both.string(), "error: " + both.string() + ":8:16: global_tokens: give either tokens"},
      {"sweep --grid " + odd.string(),
       "error: " + odd.string() + ":7:16: global_tokens = 65535 does not divide evenly over the 16"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args + " --csv " + (dir_ / "out.csv").string());
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find(" configurations"), std::string::npos) << "work started: " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out.csv"));
  }
  // A flag replaces the file's token axis, whichever unit the file used.
  const Result r = run("sweep --grid " + odd.string() + " --tokens 2048 --csv -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nMoE-GPT-S-64E,DGX-A100-2node,16,2048,uniform,none,1,"), std::string::npos) << r.out;
}

}  // namespace

