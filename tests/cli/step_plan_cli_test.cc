// `moesim plan --global-batch`: the whole step's layout planner from the command line (its table,
// JSON and token-rate search), and its bad input, each answered with exit code 2 naming the flag.
#include <map>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_fixture.h"

namespace moesim::cli_test {
namespace {

const std::string kTinyPlan =
    "plan --model tests/sim/search/data/tiny-gpt.yaml --hardware dgx-a100-80gb-hdr --global-batch 16 --jobs 2";

TEST_F(Cli, StepPlanPrintsTheSimulatedRankingAndWritesItAsJson) {
  const Result r = run(kTinyPlan + " --gpus 8 --top 2 --json " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("moesim: layouts of Tiny-GPT on 8 x A100-SXM4-80GB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank  tp  cp  pp  vpp"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty()) << "no progress on stderr when it is not a terminal: " << r.err;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  EXPECT_EQ(j["model"], "Tiny-GPT");
  EXPECT_EQ(j["global_batch"], 16);
  const auto& plan = j["plan"];
  const auto& layouts = plan["layouts"];
  ASSERT_EQ(layouts.size(), 4u);  // the best 2K by the estimate, simulated
  for (std::size_t k = 1; k < layouts.size(); ++k)
    EXPECT_LE(layouts[k - 1]["step_time_s"].get<double>(), layouts[k]["step_time_s"].get<double>());
  std::int64_t rejected = 0;
  for (const auto& rej : plan["rejections"]) rejected += rej["count"].get<std::int64_t>();
  EXPECT_EQ(plan["considered"].get<std::int64_t>(), plan["fitting"].get<std::int64_t>() + rejected);
  EXPECT_EQ(plan["estimated"], plan["fitting"]);
}

// --dispatcher deepep reaches every layout the planner simulates: its header and JSON say so, and
// `simulate` with the same flags gives the best layout's step time.
TEST_F(Cli, StepPlanWithTheDeepEpDispatcher) {
  const std::string model = "--model tests/golden/step-moe-deepep/tiny-moe-16e.yaml --hardware dgx-h100-ndr --gpus 16 ";
  const Result r = run("plan " + model + "--global-batch 32 --seq 256 --jobs 2 --tp 1 --pp 1 --ep 16 --top 1 "
                       "--dispatcher deepep --json " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(", MoE dispatcher deepep"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  EXPECT_EQ(j["dispatcher"], "deepep");
  const auto& best = j["plan"]["layouts"][0];
  const Result sim = run("simulate " + model + "--global-batch 32 --seq 256 --ep 16 --micro-batch " +
                         std::to_string(best["micro_batch"].get<int>()) + " --recompute " +
                         best["recompute"].get<std::string>() + " --zero " + std::to_string(best["zero"].get<int>()) +
                         " --chunks " + std::to_string(best["moe_chunks"].get<int>()) + " --dispatcher deepep --json -");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto js = nlohmann::json::parse(sim.out);
  EXPECT_EQ(js["layout"]["dispatcher"], "deepep");
  EXPECT_DOUBLE_EQ(js["step_time_s"].get<double>(), best["step_time_s"].get<double>()) << best.dump();
}

// A pipeline whose parts do not divide the layers: the balanced split, below the table and in the
// JSON, and `simulate --part-layers` with it runs the same step.
TEST_F(Cli, StepPlanGivesTheLayersOfEachPartOfAnUnevenSplit) {
  const std::string plan = "plan --model tests/sim/search/data/tiny-gpt-5.yaml --hardware dgx-a100-80gb-hdr "
                           "--global-batch 16 --jobs 2 --gpus 8 --top 50 --json " + (dir_ / "plan.json").string();
  const Result r = run(plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  int uneven = 0;
  for (const auto& l : j["plan"]["layouts"]) {
    if (l["pp"] == 1) {
      EXPECT_TRUE(l["part_layers"].empty()) << l.dump();
      continue;
    }
    EXPECT_EQ(l["part_layers"], nlohmann::json::parse("[2, 3]")) << l.dump();
    if (uneven++ > 0) continue;
    const std::string flags =
        " --tp " + std::to_string(l["tp"].get<int>()) + " --pp 2 --micro-batch " +
        std::to_string(l["micro_batch"].get<int>()) + " --recompute " + l["recompute"].get<std::string>() + " --zero " +
        std::to_string(l["zero"].get<int>()) + (l["sequence_parallel"].get<bool>() ? " --sequence-parallel" : "");
    const Result sim = run("simulate --model tests/sim/search/data/tiny-gpt-5.yaml --hardware dgx-a100-80gb-hdr --gpus 8 "
                           "--global-batch 16 --part-layers 2,3 --json -" + flags);
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    EXPECT_DOUBLE_EQ(nlohmann::json::parse(sim.out)["step_time_s"].get<double>(), l["step_time_s"].get<double>()) << flags;
  }
  ASSERT_GT(uneven, 0) << r.out;
  EXPECT_NE(r.out.find(": the pipeline's parts do not divide the layers; layers per part 2,3 (--part-layers)\n"),
            std::string::npos)
      << r.out;
}

// --tp, --pp, --ep, ...: the axes a plan fixes; every layout shown has one of the values given.
TEST_F(Cli, StepPlanTriesOnlyTheValuesOfTheAxesItFixes) {
  const Result r = run("plan --model tests/sim/search/data/tiny-moe.yaml --hardware dgx-a100-80gb-hdr --global-batch 16 "
                       "--jobs 2 --gpus 8 --top 20 --tp 1,2 --pp 2 --ep 4 --etp 1 --micro-batch 1-2 --chunks 1 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["plan"]["layouts"].empty());
  for (const auto& l : j["plan"]["layouts"]) {
    EXPECT_LE(l["tp"].get<int>(), 2) << l.dump();
    EXPECT_EQ(l["pp"], 2) << l.dump();
    EXPECT_EQ(l["ep"], 4) << l.dump();
    EXPECT_EQ(l["etp"], 1) << l.dump();
    EXPECT_LE(l["micro_batch"].get<int>(), 2) << l.dump();
  }
}

// The token-rate search with a fixed axis that only larger clusters have: the node counts without
// it have no candidate layout, and the search goes on.
TEST_F(Cli, StepPlanTokenRateSearchGoesOnPastNodeCountsWithoutAFixedValue) {
  const Result r = run("plan --model tests/sim/search/data/tiny-gpt-5.yaml --hardware dgx-a100-80gb-hdr --global-batch "
                       "16 --jobs 2 --top 1 --tp 8 --pp 2 --target-tokens-per-day 1e30 --max-nodes 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("    1 node(s)      8 GPUs: no candidate layout"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    2 node(s)     16 GPUs: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp 8, cp 1, pp 2"), std::string::npos) << r.out;
}

// --zero-stages: the ZeRO stages tried, named in the header and the JSON's request; every layout
// shown is one of them (the default, 0 and 1, is not named in the header).
TEST_F(Cli, StepPlanTriesTheZeroStagesItIsGiven) {
  const Result r = run(kTinyPlan + " --gpus 8 --top 4 --zero-stages 3,2 --json " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("flash attention, ZeRO stages 2,3\n"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  EXPECT_EQ(j["zero_stages"], nlohmann::json::parse("[2, 3]"));
  for (const auto& l : j["plan"]["layouts"]) EXPECT_GE(l["zero"].get<int>(), 2) << l.dump();
  const Result defaults = run(kTinyPlan + " --gpus 8 --top 1 --json -");
  ASSERT_EQ(defaults.exit_code, 0) << defaults.err;
  EXPECT_EQ(nlohmann::json::parse(defaults.out)["zero_stages"], nlohmann::json::parse("[0, 1]"));
}

// --use-tp-pp-dp-mapping with --global-batch: each pipelined layout in both rank orders, a `ranks`
// column and JSON keys; the best layout's step time is what `simulate` gives for it in its order.
TEST_F(Cli, StepPlanTriesBothRankOrders) {
  const std::string model = "--model gpt-1.7b --hardware dgx-a100-80gb-hdr --gpus 16 --global-batch 32 --seq 1024 ";
  const Result r = run("plan " + model + "--tp 1 --cp 1 --pp 2 --vpp 1 --micro-batch 1 --recompute none "
                       "--zero-stages 0 --top 2 --use-tp-pp-dp-mapping --json " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("each with pp > 1 in the rank orders tp-cp-ep-dp-pp and tp-cp-pp-dp\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  mb  ranks     recompute"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  EXPECT_EQ(j["try_tp_pp_dp_mapping"], true);
  const auto& layouts = j["plan"]["layouts"];
  ASSERT_EQ(layouts.size(), 2u) << j.dump();
  std::set<std::string> orders;
  for (const auto& l : layouts) orders.insert(l["rank_order"].get<std::string>());
  EXPECT_EQ(orders, (std::set<std::string>{"tp-cp-ep-dp-pp", "tp-cp-pp-dp"}));
  const auto& best = layouts[0];
  const Result sim = run("simulate " + model + "--tp 1 --pp 2 --json -" +
                         (best["rank_order"] == "tp-cp-pp-dp" ? " --use-tp-pp-dp-mapping" : ""));
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(sim.out)["step_time_s"].get<double>(), best["step_time_s"].get<double>());
  EXPECT_EQ(run("plan " + model + "--pp 1 --use-tp-pp-dp-mapping").exit_code, 2);
}

// --overlap-moe-expert-parallel-comm with --global-batch: every layout the combined 1F1B runs on
// tried with and without it, an `a2a ovl` column and JSON keys; `simulate` with the flag gives an
// overlapped layout's step time. A dense model is refused, exit 2.
TEST_F(Cli, StepPlanTriesTheCombinedOneFOneB) {
  const std::string model = "--model tests/sim/search/data/tiny-moe.yaml --hardware dgx-a100-80gb-hdr --gpus 8 ";
  const Result r = run("plan " + model + "--global-batch 16 --jobs 2 --top 20 --chunks 1 --pp 1 --ep 2,4 "
                       "--overlap-moe-expert-parallel-comm --json " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(", each with and without the combined 1F1B where it runs\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  chunks  a2a ovl  recompute"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  EXPECT_EQ(j["try_overlap_moe_expert_parallel_comm"], true);
  int overlapped = 0;
  for (const auto& l : j["plan"]["layouts"]) {
    if (!l["overlap_moe_expert_parallel_comm"].get<bool>()) continue;
    EXPECT_NE(l["recompute"], "full") << l.dump();
    if (overlapped++ > 0) continue;
    const Result sim = run("simulate " + model + "--global-batch 16 --tp " + std::to_string(l["tp"].get<int>()) +
                           " --cp " + std::to_string(l["cp"].get<int>()) + " --ep " + std::to_string(l["ep"].get<int>()) +
                           " --etp " + std::to_string(l["etp"].get<int>()) + " --micro-batch " +
                           std::to_string(l["micro_batch"].get<int>()) + " --recompute " +
                           l["recompute"].get<std::string>() + " --zero " + std::to_string(l["zero"].get<int>()) +
                           (l["sequence_parallel"].get<bool>() ? " --sequence-parallel" : "") +
                           " --overlap-moe-expert-parallel-comm --json -");
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    EXPECT_DOUBLE_EQ(nlohmann::json::parse(sim.out)["step_time_s"].get<double>(), l["step_time_s"].get<double>())
        << l.dump();
  }
  EXPECT_GT(overlapped, 0) << r.out;
  const Result dense = run(kTinyPlan + " --gpus 8 --overlap-moe-expert-parallel-comm");
  EXPECT_EQ(dense.exit_code, 2);
  EXPECT_NE(dense.err.find("--overlap-moe-expert-parallel-comm overlaps the MoE layers' all-to-alls; Tiny-GPT has none"),
            std::string::npos)
      << dense.err;
}

// --strategies with --global-batch: the MoE layers' memory reuse, a `reuse` column and JSON key.
TEST_F(Cli, StepPlanTriesMemoryReuseStrategies) {
  const Result r = run("plan --model tests/sim/search/data/tiny-moe.yaml --hardware dgx-a100-80gb-hdr --global-batch 16 "
                       "--jobs 2 --gpus 8 --top 4 --chunks 1 --strategies none,s3 --json " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  chunks  reuse  recompute"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  for (const auto& l : j["plan"]["layouts"]) {
    const std::string s = l["moe_strategy"];
    EXPECT_TRUE(s == "none" || s == "s3") << l.dump();
  }
}

TEST_F(Cli, StepPlanOfAnMoeModelShowsTheExpertsTensorParallelSizeAndChunks) {
  const std::string moe = "plan --model tests/sim/search/data/tiny-moe.yaml --hardware dgx-a100-80gb-hdr "
                          "--global-batch 16 --jobs 2 --gpus 8 --top 2 --chunks 1,2";
  const Result r = run(moe + " --json " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank  tp  cp  pp  vpp   ep  etp   dp   mb  chunks  recompute"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chunks: the MoE layers' sub-stage pipelining"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  for (const auto& layout : j["plan"]["layouts"]) {
    EXPECT_TRUE(layout["etp"].is_number_integer()) << layout;
    EXPECT_TRUE(layout["moe_chunks"] == 1 || layout["moe_chunks"] == 2) << layout;
  }
  // A dense model's layouts are etp = tp and unchunked: its table keeps its columns, its JSON says so.
  const Result dense = run(kTinyPlan + " --gpus 8 --top 1 --json " + (dir_ / "dense.json").string());
  ASSERT_EQ(dense.exit_code, 0) << dense.err;
  EXPECT_NE(dense.out.find("rank  tp  cp  pp  vpp   ep   dp   mb  recompute"), std::string::npos) << dense.out;
  const auto d = nlohmann::json::parse(read_file(dir_ / "dense.json"));
  for (const auto& layout : d["plan"]["layouts"]) {
    EXPECT_EQ(layout["etp"], layout["tp"]);
    EXPECT_EQ(layout["moe_chunks"], 1);
  }
}

// --routing zipf:<s> --seed N: every layout is simulated with that routing, so a planned layout's
// step is the one `simulate --global-batch` gives it with the same routing (and not the uniform one).
TEST_F(Cli, StepPlanSimulatesEveryLayoutWithItsRouting) {
  const std::string routing = " --routing zipf:1.5 --seed 3";
  const Result r = run("plan --model tests/sim/search/data/tiny-moe.yaml --hardware dgx-a100-80gb-hdr --global-batch 16 "
                       "--jobs 2 --gpus 8 --top 8 --chunks 1" + routing + " --json " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("flash attention, routing zipf:1.5 (seed 3)"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  EXPECT_EQ(j["routing"], "zipf:1.5");
  EXPECT_EQ(j["seed"], 3);
  const nlohmann::json* spread = nullptr;  // a layout whose experts lie on several ranks
  for (const auto& layout : j["plan"]["layouts"])
    if (layout["ep"].get<int>() > 1) {
      spread = &layout;
      break;
    }
  ASSERT_NE(spread, nullptr) << j.dump(1);
  const nlohmann::json& l = *spread;
  const std::string simulate =
      "simulate --model tests/sim/search/data/tiny-moe.yaml --hardware dgx-a100-80gb-hdr --gpus 8 --global-batch 16 "
      "--tp " + l["tp"].dump() + " --cp " + l["cp"].dump() + " --pp " + l["pp"].dump() + " --ep " + l["ep"].dump() +
      " --etp " + l["etp"].dump() + " --micro-batch " + l["micro_batch"].dump() + " --zero " + l["zero"].dump() +
      " --chunks " + l["moe_chunks"].dump() + " --recompute " + l["recompute"].get<std::string>();
  const Result routed = run(simulate + routing + " --json " + (dir_ / "routed.json").string());
  const Result uniform = run(simulate + " --json " + (dir_ / "uniform.json").string());
  ASSERT_EQ(routed.exit_code, 0) << routed.err;
  ASSERT_EQ(uniform.exit_code, 0) << uniform.err;
  const double planned = l["step_time_s"].get<double>();
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(read_file(dir_ / "routed.json"))["step_time_s"].get<double>(), planned);
  EXPECT_NE(nlohmann::json::parse(read_file(dir_ / "uniform.json"))["step_time_s"].get<double>(), planned);
}

// --recompute-modules A/B: each set a candidate of its own, named "sel k" in the table, its
// modules in the JSON; the planned step is the one `simulate` gives those modules.
TEST_F(Cli, StepPlanTriesEachSetOfRecomputeModules) {
  const Result r = run("plan --model tests/sim/search/data/tiny-moe.yaml --hardware dgx-a100-80gb-hdr --global-batch 16 "
                       "--jobs 2 --gpus 8 --top 40 --chunks 1 --tp 1 --cp 1 --recompute selective "
                       "--recompute-modules layernorm,moe_act/moe --json " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("; sel 1 re-runs layernorm,moe_act; sel 2 re-runs moe)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  sel 1  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  sel 2  "), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(dir_ / "plan.json"));
  std::map<std::string, int> sets;
  const nlohmann::json* moe = nullptr;
  for (const auto& l : j["plan"]["layouts"]) {
    ++sets[l["recompute_modules"].get<std::string>()];
    if (l["recompute_modules"] == "moe" && moe == nullptr) moe = &l;
  }
  EXPECT_EQ(sets.size(), 2u) << j.dump(1);
  ASSERT_NE(moe, nullptr);
  const nlohmann::json& l = *moe;
  const Result sim = run("simulate --model tests/sim/search/data/tiny-moe.yaml --hardware dgx-a100-80gb-hdr --gpus 8 "
                         "--global-batch 16 --tp 1 --cp 1 --pp " + l["pp"].dump() + " --vpp " + l["vpp"].dump() +
                         " --ep " + l["ep"].dump() + " --etp " + l["etp"].dump() + " --chunks " + l["moe_chunks"].dump() +
                         " --micro-batch " + l["micro_batch"].dump() + " --zero " + l["zero"].dump() +
                         " --recompute selective --recompute-modules moe --json -");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(sim.out)["step_time_s"].get<double>(), l["step_time_s"].get<double>());
}

TEST_F(Cli, StepPlanFindsTheNodesForATokenRate) {
  // Any positive rate one node reaches: the search stops at 1 node.
  const Result r = run(kTinyPlan + " --top 1 --target-tokens-per-day 1e6 --max-nodes 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("    1 node(s)      8 GPUs: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("answer: 1 node(s), 8 GPUs"), std::string::npos) << r.out;
  const Result none = run(kTinyPlan + " --top 1 --target-tokens-per-day 1e30 --max-nodes 1");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("answer: none up to 1 node(s)"), std::string::npos) << none.out;
}

TEST_F(Cli, StepPlanBadInputExitsTwoNamingTheFlag) {
  const std::pair<std::string, std::string> cases[] = {
      {kTinyPlan + " --tokens 4096", "--tokens belongs to the MoE-layer plan"},
      {kTinyPlan + " --no-dtd", "--no-dtd belongs to the MoE-layer plan"},
      {kTinyPlan + " --gpus 8 --pp 3", "--pp 3: no candidate layout of this request has it (pp: the divisors of GPUs / "
                                       "(tp x cp) up to the layers)"},
      {kTinyPlan + " --gpus 8 --tp 2,x", "--tp: 'x' is not"},
      {kTinyPlan + " --gpus 8 --micro-batch 3", "--micro-batch 3: no candidate layout of this request has it"},
      {kTinyPlan + " --gpus 8 --ep 2", "--ep 2: no candidate layout of this request has it (ep: the divisors of the "
                                       "experts; 1 for a dense model)"},
      {"plan --model gpt-1.7b --hardware dgx-a100-80gb-hdr --tokens 4096 --pp 2",
       "--pp belongs to the whole step's layout plan: give --global-batch"},
      {"plan --model moe-gpt-s-64e --hardware adira-8x-dgx-a100 --tokens 4096 --tp 2,4",
       "--tp '2,4': the MoE-layer plan takes one degree"},
      {kTinyPlan + " --recompute none,some", "--recompute: 'some' is not a recomputation; valid: none, selective, full"},
      {kTinyPlan + " --recompute-modules layernorm", "give --recompute with selective among its values"},
      {kTinyPlan + " --recompute selective --recompute-modules qkv", "'qkv' is not a module moesim recomputes"},
      {kTinyPlan + " --recompute selective --recompute-modules core_attn//layernorm", "an empty set; give sets of modules"},
      {kTinyPlan + " --recompute selective --recompute-modules core_attn/core_attn", "the set 'core_attn' is named twice"},
      {kTinyPlan + " --recompute selective --recompute-modules core_attn/moe", "--recompute-modules moe re-runs the MoE layers' MLPs; Tiny-GPT has no MoE layer"},
      {kTinyPlan + " --chunks 0", "--chunks"},
      {kTinyPlan + " --chunks 4-2", "--chunks: range '4-2' is empty"},
      {kTinyPlan + " --top 0", "--top"},
      {kTinyPlan + " --zero-stages 0,4", "--zero-stages: 4 is outside [0, 3]"},
      {kTinyPlan + " --strategies all", "--strategies: memory reuse (s1) reuses the MoE layers' buffers; Tiny-GPT has no "
                                          "MoE layer"},
      {kTinyPlan + " --strategies s7", "--strategies"},
      {kTinyPlan + " --schedules 1f1b,zb-h2", "--schedules: 'zb-h2' is not a schedule; valid: "},
      {kTinyPlan + " --zero-stages 2-1", "--zero-stages: range '2-1' is empty"},
      {"plan --model gpt-1.7b --hardware dgx-a100-80gb-hdr --tokens 4096 --zero-stages 1",
       "--zero-stages belongs to the whole step's layout plan: give --global-batch"},
      {kTinyPlan + " --attention fast", "--attention: unknown value 'fast'; valid values: flash, unfused"},
      {kTinyPlan + " --target-tokens-per-day 0", "--target-tokens-per-day"},
      {kTinyPlan + " --target-tokens-per-day 1e12 --gpus 16", "drop --gpus and --nodes"},
      {kTinyPlan + " --max-nodes 4", "--max-nodes with --global-batch bounds the search of --target-tokens-per-day"},
      {"plan --model gpt-1.7b --hardware dgx-a100-80gb-hdr --seq 1024 --tokens 4096",
       "--seq belongs to the whole step's layout plan: give --global-batch"},
      {"plan --model moe-gpt-s-64e --hardware adira-8x-dgx-a100", "--tokens is required"},
      {kTinyPlan + " --routing zipf:1.2", "--routing zipf:1.2 spreads tokens over experts; Tiny-GPT has no MoE layer"},
      {"plan --model tests/sim/search/data/tiny-moe.yaml --hardware dgx-a100-80gb-hdr --global-batch 16 --routing "
       "matrix:tests/docs/bad_inputs/three-ranks.csv",
       "a routing matrix fixes the expert-parallel size, which the layout plan varies"},
  };
  for (const auto& [args, message] : cases) {
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace moesim::cli_test
