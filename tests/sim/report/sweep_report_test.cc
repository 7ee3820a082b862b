// The derived views of a sweep (best per group, Pareto front, capacity) on hand-made records, and
// the fixed formats of its CSV.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/report/plan_report.h"
#include "sim/report/sweep_columns.h"
#include "sim/report/sweep_report.h"

namespace moesim {
namespace {

SweepRecord rec(int gpus, std::int64_t tokens, int n, MemoryStrategy s, TimeNs step, std::int64_t peak, bool fits) {
  SweepRecord r;
  r.model = "m";
  r.hardware = "h";
  r.gpus = gpus;
  r.tokens = tokens;
  r.routing = "uniform";
  r.strategy = s;
  r.num_chunks = n;
  r.step_ns = step;
  r.forward_ns = step / 2;
  r.backward_ns = step - step / 2;
  r.peak_bytes = peak;
  r.model_peak_bytes = peak;  // a one-layer model: the simulated layer is the whole model
  r.capacity_bytes = 100;
  r.fits = fits;
  r.layout.ep = gpus;
  r.global_tokens = gpus * tokens;
  return r;
}

// The same record in another layout: tp ranks share their tokens, so tokens per GPU are
// global / (gpus / tp).
SweepRecord in_layout(SweepRecord r, int tp) {
  r.layout.tp = tp;
  r.layout.ep = r.gpus / tp;
  r.tokens = r.global_tokens / (r.gpus / tp);
  r.drop_duplicate_tokens = tp > 1;
  return r;
}

SweepTable table() {
  SweepTable t;
  t.name = "t";
  t.tool_version = "test";
  using enum MemoryStrategy;
  t.records = {rec(8, 1024, 1, kNone, 1000, 150, false), rec(8, 1024, 2, kNone, 800, 120, false),
               rec(8, 1024, 2, kS4, 900, 90, true),      rec(16, 1024, 1, kNone, 700, 80, true),
               rec(16, 1024, 2, kNone, 600, 85, true),   rec(16, 1024, 2, kS4, 650, 50, true)};
  return t;
}

TEST(SweepReportTest, BestPerGroupIsTheFastestThatFits) {
  const auto best = best_per_group(table());
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].gpus, 8);
  EXPECT_EQ(best[0].best, 2);  // n = 2 none is faster but does not fit
  EXPECT_EQ(best[0].baseline, 0);
  EXPECT_EQ(best[1].best, 4);
}

TEST(SweepReportTest, ParetoFrontAndCapacity) {
  SweepTable t = table();
  // By step: 600/85 (front), 650/50 (front), 700/80, 800/120, 900/90, 1000/150.
  EXPECT_EQ(pareto_front(t), (std::vector<int>{4, 5}));
  auto cap = capacity_view(t);
  ASSERT_EQ(cap.size(), 1u);
  EXPECT_EQ(cap[0].gpus, 8);  // 8 GPUs fit with s4
  EXPECT_EQ(cap[0].record, 2);
  t.step_target_ns = 700;     // 8 GPUs' best (900 ns) misses the target, 16 GPUs' (600 ns) meets it
  cap = capacity_view(t);
  EXPECT_EQ(cap[0].gpus, 16);
  t.step_target_ns = 1;
  EXPECT_EQ(capacity_view(t)[0].gpus, 0);
}

TEST(SweepReportTest, CsvColumnsAndFixedFormats) {
  const std::string csv = sweep_csv(table());
  const std::string header =
      "model,hardware,gpus,tokens,routing,strategy,n,step_us,forward_us,backward_us,peak_bytes,capacity_bytes,fits,"
      "speedup_vs_n1_none,best,expert_imbalance,rank_imbalance,dropped_fraction,tp,ep,dp,global_tokens,best_layout,"
      "drop_duplicate_tokens,grad_sync,zero_stage,checkpoint,model_peak_bytes\n";
  ASSERT_EQ(csv.rfind(header, 0), 0u);
  EXPECT_NE(csv.find("m,h,8,1024,uniform,s4,2,0.900,0.450,0.450,90,100,1,1.1111,1,1.0000,1.0000,0.000000,"
                     "1,8,1,8192,1,0,0,0,none,90\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("m,h,16,1024,uniform,none,1,0.700,0.350,0.350,80,100,1,1.0000,0,1.0000,1.0000,0.000000,"
                     "1,16,1,16384,0,0,0,0,none,80\n"),
            std::string::npos)
      << csv;
  SweepTable quoted = table();
  quoted.records[0].model = "a,\"b\"";
  EXPECT_EQ(sweep_csv(quoted).find("\"a,\"\"b\"\"\",h,8"), header.size());
}

// Every column of a record has the same value in the CSV and in the JSON records, and the JSON
// records hold nothing else; docs/planning.md lists the columns as they are declared.
TEST(SweepReportTest, CsvAndJsonRecordsComeFromOneListOfColumns) {
  const SweepTable t = table();
  const auto j = nlohmann::json::parse(sweep_json(t));
  const std::string csv = sweep_csv(t);
  std::istringstream lines(csv);
  std::string header, first;
  std::getline(lines, header);
  std::getline(lines, first);
  std::vector<std::string> cells;
  std::stringstream row(first);
  for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
  if (!first.empty() && first.back() == ',') cells.push_back("");
  const std::vector<SweepColumn>& columns = sweep_columns();
  ASSERT_EQ(cells.size(), columns.size()) << first;
  std::size_t keyed = 0;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (!columns[i].json_key) continue;
    ++keyed;
    const nlohmann::json& v = j["records"][0][columns[i].json_key];
    ASSERT_FALSE(v.is_null()) << columns[i].json_key;
    std::string expected;
    if (v.is_string()) expected = v.get<std::string>();
    else if (v.is_boolean()) expected = v.get<bool>() ? "1" : "0";
    else if (std::string(columns[i].name).ends_with("_us")) expected = format_fixed(v.get<double>() / 1e3, 3);
    else if (v.is_number_float()) expected = cells[i];  // fixed decimals in the CSV; checked below
    else expected = std::to_string(v.get<long long>());
    EXPECT_EQ(cells[i], expected) << columns[i].name;
    if (v.is_number_float()) {
      EXPECT_NEAR(std::stod(cells[i]), v.get<double>(), 1e-4) << columns[i].name;
    }
  }
  EXPECT_EQ(j["records"][0].size(), keyed);
  std::ifstream in(std::string(MOESIM_SOURCE_DIR) + "/docs/planning.md");
  std::stringstream doc;
  doc << in.rdbuf();
  EXPECT_NE(doc.str().find(sweep_columns_markdown()), std::string::npos)
      << "docs/planning.md's table of the CSV columns should read:\n" << sweep_columns_markdown();
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(SweepReportTest, HtmlIsSelfContained) {
  const std::string html = sweep_html(table());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // One inline script (the filter); nothing loaded from anywhere.
  EXPECT_EQ(count(html, "<script"), 1u);
  for (const char* outside : {"<script src", "<link", "src=", "href=", "url(", "@import", "https:"}) {
    EXPECT_EQ(html.find(outside), std::string::npos) << outside;
  }
  EXPECT_EQ(count(html, "<svg"), 6u);
  EXPECT_EQ(count(html, "data-plot=\"step-vs-n\""), 2u);  // one per group
  EXPECT_EQ(count(html, "data-plot=\"pareto\""), 1u);     // one workload: m on h at 1024 tokens
  EXPECT_EQ(count(html, "data-plot=\"best-n\""), 1u);     // per model and hardware
  EXPECT_EQ(count(html, "data-plot=\"capacity-throughput\""), 1u);
  EXPECT_EQ(count(html, "data-plot=\"capacity-headroom\""), 1u);
  // Every plot sits in a figure the filter can select on; one model and hardware: no filter.
  EXPECT_EQ(count(html, "<figure class=\"plot\""), 6u);
  EXPECT_EQ(count(html, "<select"), 1u);  // gpus, the one dimension that varies
  EXPECT_NE(html.find("<select name=\"gpus\"><option value=\"\">all</option><option>8</option><option>16</option>"),
            std::string::npos);
}

TEST(SweepReportTest, HtmlPlotsEveryGroup) {
  // 40 groups (the report once stopped at 12): 2 models x 4 GPU counts x 5 token counts.
  SweepTable t;
  t.name = "forty";
  for (const char* model : {"a", "b"}) {
    for (int gpus : {8, 16, 32, 64}) {
      for (std::int64_t tokens : {1024, 2048, 4096, 8192, 16384}) {
        for (int n : {1, 2}) {
          SweepRecord r = rec(gpus, tokens, n, MemoryStrategy::kNone, 1000 * n, 50, true);
          r.model = model;
          t.records.push_back(r);
        }
      }
    }
  }
  const std::string html = sweep_html(t);
  EXPECT_EQ(best_per_group(t).size(), 40u);
  EXPECT_EQ(count(html, "data-plot=\"step-vs-n\""), 40u);
  EXPECT_EQ(count(html, "data-plot=\"pareto\""), 10u);  // a workload per model and token count
  EXPECT_EQ(count(html, "data-plot=\"capacity-throughput\""), 2u);
  EXPECT_EQ(html.find("more groups"), std::string::npos);
  // Equal tables, equal bytes.
  EXPECT_EQ(html, sweep_html(t));
}

TEST(SweepReportTest, HtmlMarksTheParetoFrontAndFadesTheRest) {
  const std::string html = sweep_html(table());
  const std::size_t begin = html.find("data-plot=\"pareto\""), end = html.find("</svg>", begin);
  const std::string pareto = html.substr(begin, end - begin);
  // Records 4 and 5 are the front; the other four are dominated.
  EXPECT_EQ(count(pareto, "<title>on the Pareto front: "), 2u);
  EXPECT_EQ(count(pareto, "fill-opacity=\"0.3\""), 4u);
  EXPECT_EQ(count(pareto, "<polyline"), 1u);  // the front's line
  EXPECT_NE(pareto.find(">Pareto front</text>"), std::string::npos);
  // Tooltips carry the configuration.
  EXPECT_NE(pareto.find("<title>on the Pareto front: m on h\ntp 1 x ep 16 x dp 1 = 16 GPUs, routing uniform\n"
                        "1024 tokens per GPU, 16384 per step\nstrategy none, n = 2\nstep 0.001 ms, "
                        "27,306,666,667 tokens/s\nmodel peak 0.00 of 0.00 GiB: fits</title>"),
            std::string::npos)
      << pareto;
}

TEST(SweepReportTest, CapacityCurveGivesThroughputAndHeadroom) {
  SweepTable t = table();
  std::vector<CapacityPoint> curve = capacity_curve(t);
  ASSERT_EQ(curve.size(), 2u);
  EXPECT_EQ(curve[0].gpus, 8);
  EXPECT_EQ(curve[0].record, 2);  // 900 ns, 8 x 1024 tokens, peak 90 of 100
  EXPECT_TRUE(curve[0].meets_target);
  EXPECT_EQ(curve[1].gpus, 16);
  EXPECT_EQ(curve[1].record, 4);
  EXPECT_DOUBLE_EQ(tokens_per_second(t.records[2]), 8192 / 900e-9);
  EXPECT_EQ(memory_headroom_bytes(t.records[2]), 10);
  EXPECT_EQ(memory_headroom_bytes(t.records[0]), -50);  // does not fit
  t.step_target_ns = 700;
  curve = capacity_curve(t);
  EXPECT_FALSE(curve[0].meets_target);
  EXPECT_TRUE(curve[1].meets_target);
  // The capacity answer (16 GPUs) is outlined in both charts and given in the table.
  const std::string html = sweep_html(t);
  EXPECT_EQ(count(html, "<title>the smallest GPU count that meets the target: "), 2u);
  EXPECT_NE(html.find("<td>16</td><td class=\"l\">tp 1 x ep 16 x dp 1 = 16 GPUs</td><td>2</td><td>none</td>"
                      "<td>0.001</td><td>27,306,666,667</td><td>0.00</td><td>0.00</td>"),
            std::string::npos)
      << html;
  const auto j = nlohmann::json::parse(sweep_json(t));
  ASSERT_EQ(j["capacity_curve"].size(), 2u);
  EXPECT_EQ(j["capacity_curve"][0]["meets_target"], false);
  EXPECT_EQ(j["capacity_curve"][1]["tokens_per_s"], 27306666667);
  EXPECT_EQ(j["capacity_curve"][1]["memory_headroom_bytes"], 15);
  EXPECT_EQ(j["pareto_per_workload"][0]["front"], (std::vector<int>{4, 5}));
}

// Three layouts of 16 GPUs at one global batch of 16384 tokens: tp 1 does not fit, tp 2 is the
// fastest that fits, tp 4 fits but is slower.
SweepTable layouts() {
  SweepTable t;
  t.name = "layouts";
  t.tool_version = "test";
  t.token_unit = TokenUnit::kGlobal;
  t.grad_sync = true;
  t.zero_stage = 1;
  using enum MemoryStrategy;
  const SweepRecord base = rec(16, 1024, 1, kNone, 0, 0, false);
  const auto at = [&](int tp, int n, TimeNs step, std::int64_t peak) {
    SweepRecord r = in_layout(base, tp);
    r.num_chunks = n;
    r.step_ns = step;
    r.forward_ns = step / 2;
    r.backward_ns = step - step / 2;
    r.peak_bytes = peak;
    r.model_peak_bytes = peak;
    r.fits = peak <= r.capacity_bytes;
    return r;
  };
  t.records = {at(1, 1, 500, 120), at(1, 2, 450, 110), at(2, 1, 700, 90), at(2, 2, 600, 95),
               at(4, 1, 800, 60),  at(4, 2, 650, 70)};
  return t;
}

TEST(SweepReportTest, TheFastestLayoutOfABatch) {
  const SweepTable t = layouts();
  const auto groups = best_per_group(t);
  ASSERT_EQ(groups.size(), 3u);  // one group per layout
  EXPECT_EQ(groups[0].best, -1);
  EXPECT_EQ(groups[1].best, 3);
  EXPECT_EQ(groups[1].tp_size, 2);
  EXPECT_EQ(groups[1].tokens, 2048);
  EXPECT_EQ(groups[1].global_tokens, 16384);
  EXPECT_EQ(groups[2].best, 5);
  const auto batches = best_layout_per_batch(t);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].global_tokens, 16384);
  EXPECT_EQ(batches[0].groups, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(batches[0].best, 3);
  // The capacity view keys the batch as the sweep gave it, and takes the fastest layout at the
  // smallest GPU count.
  const auto capacity = capacity_view(t);
  ASSERT_EQ(capacity.size(), 1u);
  EXPECT_EQ(capacity[0].tokens, 16384);
  EXPECT_EQ(capacity[0].gpus, 16);
  EXPECT_EQ(capacity[0].record, 3);
}

TEST(SweepReportTest, LayoutColumnsAndPreamble) {
  const SweepTable t = layouts();
  const std::string csv = sweep_csv(t);
  // tp 2, n = 2: the group's best (1.1667x over its n = 1) and the batch's fastest layout.
  EXPECT_NE(csv.find("m,h,16,2048,uniform,none,2,0.600,0.300,0.300,95,100,1,1.1667,1,1.0000,1.0000,0.000000,"
                     "2,8,1,16384,1,1,1,1,none,95\n"),
            std::string::npos)
      << csv;
  // tp 4, n = 2: its group's best, not the batch's.
  EXPECT_NE(csv.find("m,h,16,4096,uniform,none,2,0.650,0.325,0.325,70,100,1,1.2308,1,1.0000,1.0000,0.000000,"
                     "4,4,1,16384,0,1,1,1,none,70\n"),
            std::string::npos)
      << csv;
  const auto j = nlohmann::json::parse(sweep_json(t));
  EXPECT_EQ(j["token_axis"], "global_tokens");
  EXPECT_EQ(j["grad_sync"], true);
  EXPECT_EQ(j["zero_stage"], 1);
  EXPECT_EQ(j["records"][3]["tp"], 2);
  EXPECT_EQ(j["records"][3]["ep"], 8);
  EXPECT_EQ(j["records"][3]["dp"], 1);
  EXPECT_EQ(j["records"][3]["global_tokens"], 16384);
  EXPECT_EQ(j["records"][3]["tokens"], 2048);
  EXPECT_EQ(j["best_layout_per_batch"][0]["best_record"], 3);
  EXPECT_EQ(j["best_layout_per_batch"][0]["layouts"][0]["best_record"], nullptr);
  EXPECT_EQ(j["best_layout_per_batch"][0]["layouts"][2]["tp"], 4);
  EXPECT_EQ(j["capacity"][0]["global_tokens"], 16384);
  EXPECT_FALSE(j["capacity"][0].contains("tokens"));
  const std::string html = sweep_html(t);
  EXPECT_NE(html.find("Token axis: global tokens per step"), std::string::npos);
  EXPECT_NE(html.find("Layouts: tensor-parallel degree 1, 2, 4, the expert-parallel group spanning GPUs / tp, "
                      "duplicate token dropping on. Gradient all-reduces simulated; ZeRO stage 1; activation checkpointing none."),
            std::string::npos);
  EXPECT_NE(html.find("Layouts at one global batch"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">tp 2 x ep 8 x dp 1 = 16 GPUs</td><td>2048</td><td>2</td><td>none</td>"
                      "<td>0.001</td><td>0.00</td><td class=\"l\">fastest</td>"),
            std::string::npos)
      << html;
  // A sweep of one layout has no layout section; layouts that never share a global batch get a note.
  EXPECT_EQ(sweep_html(table()).find("Layouts at one global batch"), std::string::npos);
  SweepTable apart = table();
  apart.records[3] = in_layout(apart.records[3], 2);
  apart.records[3].tokens = 1024;  // tokens per GPU kept, so tp 2 trains half the batch
  apart.records[3].global_tokens = 8192;
  EXPECT_NE(sweep_html(apart).find("No global batch of this grid has more than one layout"), std::string::npos);
  EXPECT_NE(sweep_html(table()).find("Gradient all-reduces not simulated; ZeRO stage 0; activation checkpointing none."), std::string::npos);
}

}  // namespace
}  // namespace moesim
