// The derived views of a sweep (best per group, Pareto front, capacity) on hand-made records, and
// the fixed formats of its CSV.
#include <gtest/gtest.h>

#include <algorithm>
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
  r.capacity_bytes = 100;
  r.fits = fits;
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
      "speedup_vs_n1_none,best,expert_imbalance,rank_imbalance,dropped_fraction\n";
  ASSERT_EQ(csv.rfind(header, 0), 0u);
  EXPECT_NE(csv.find("m,h,8,1024,uniform,s4,2,0.900,0.450,0.450,90,100,1,1.1111,1,1.0000,1.0000,0.000000\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("m,h,16,1024,uniform,none,1,0.700,0.350,0.350,80,100,1,1.0000,0,1.0000,1.0000,0.000000\n"),
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

}  // namespace
}  // namespace moesim
