// The derived views of a sweep (best per group, Pareto front, capacity) on hand-made records, and
// the fixed formats of its CSV.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

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

TEST(SweepReportTest, HtmlIsSelfContained) {
  const std::string html = sweep_html(table());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("https:"), std::string::npos);
  EXPECT_GE(static_cast<int>(std::count(html.begin(), html.end(), '\n')), 10);
  std::size_t svgs = 0;
  for (std::size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, 2u + 3u);  // one time-vs-n per group, Pareto, best n, capacity
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
