// The whole step's timeline lanes (step_lanes.h) and HTML report (step_html.h): lanes that cover
// the step exactly with one segment per pass and the report's bubbles; a page whose tags balance,
// that loads nothing, shows every stage's numbers as the JSON has them and draws one timeline lane
// per stage with bars that keep apart and inside the axis.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "sim/step/step_html.h"
#include "sim/report/plan_report.h"
#include "sim/step/step_lanes.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

using Json = nlohmann::ordered_json;

// GPT-1.7B on 16 A100s: tp 2, pp 4, dp 2, 8 microbatches per pipeline.
StepSpec gpt_step(PipelineSchedule schedule, int vpp = 1) {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = 2;
  s.layout.pp = 4;
  s.layout.vpp = vpp;
  s.global_batch = 16;
  s.seq = 1024;
  s.schedule = schedule;
  return s;
}

// Qwen3-30B-A3B on 16 A100s: its all-to-alls, tp 2, pp 2, ep 4.
StepSpec moe_step() {
  StepSpec s = gpt_step(PipelineSchedule::kOneFOneB);
  s.layout.pp = 2;
  s.layout.ep = 4;
  s.sequence_parallel = true;
  return s;
}

// The same with a host that launches each task in 40 us (--host-launch-us): idle time the host causes.
StepSpec host_bound_moe_step() {
  StepSpec s = moe_step();
  s.host_launch_ns = 40'000;
  return s;
}

struct Case {
  const char* name;
  const char* model;
  StepSpec spec;
};

// moe_step interleaved (vpp 2) with Megatron-Core's combined 1F1B: its pairs are one segment each.
StepSpec combined_moe_step() {
  StepSpec s = moe_step();
  s.layout.vpp = 2;
  s.schedule = PipelineSchedule::kInterleaved;
  s.overlap_moe_ep_comm = true;
  return s;
}

std::vector<Case> cases() {
  return {{"gpipe", "gpt-1.7b", gpt_step(PipelineSchedule::kGpipe)},
          {"1f1b", "gpt-1.7b", gpt_step(PipelineSchedule::kOneFOneB)},
          {"interleaved", "gpt-1.7b", gpt_step(PipelineSchedule::kInterleaved, 2)},
          {"zb-h1", "gpt-1.7b", gpt_step(PipelineSchedule::kZeroBubbleH1)},
          {"moe", "qwen3-30b-a3b", moe_step()},
          {"moe, host launches", "qwen3-30b-a3b", host_bound_moe_step()},
          {"dualpipe", "gpt-1.7b", gpt_step(PipelineSchedule::kDualPipe)},
          {"moe, combined 1f1b", "qwen3-30b-a3b", combined_moe_step()}};
}

SimulatedStep simulate(const Case& c) {
  return simulate_training_step(testing::model_preset(c.model), testing::a100_cluster(c.spec.layout.gpus), c.spec);
}

TEST(StepLanes, CoverTheStepWithOneSegmentPerPassAndTheReportsBubbles) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const SimulatedStep sim = simulate(c);
    const std::vector<StageLane> lanes = step_lanes(sim.graph, sim.run);
    ASSERT_EQ(lanes.size(), sim.report.stages.size());
    for (const StageLane& lane : lanes) {
      SCOPED_TRACE("stage " + std::to_string(lane.stage));
      ASSERT_FALSE(lane.segments.empty());
      EXPECT_EQ(lane.segments.front().start_ns, 0);
      EXPECT_EQ(lane.segments.back().end_ns, sim.report.step_ns);
      TimeNs bubble = 0;
      std::set<std::tuple<int, int, int>> passes;  // (work, microbatch, chunk)
      for (std::size_t i = 0; i < lane.segments.size(); ++i) {
        const LaneSegment& s = lane.segments[i];
        ASSERT_LT(s.start_ns, s.end_ns);
        if (i > 0) {
          ASSERT_EQ(s.start_ns, lane.segments[i - 1].end_ns);  // disjoint and without gaps
        }
        if (s.kind == LaneSegmentKind::kBubble) bubble += s.end_ns - s.start_ns;
        if (s.kind == LaneSegmentKind::kPass) {
          passes.insert({static_cast<int>(s.action.work), s.action.microbatch, s.action.chunk});
          if (s.paired) passes.insert({static_cast<int>(s.paired->work), s.paired->microbatch, s.paired->chunk});
          EXPECT_LE(s.true_start_ns, s.start_ns);
        }
      }
      const StageReport& stage = sim.report.stages[static_cast<std::size_t>(lane.stage)];
      EXPECT_EQ(bubble, stage.bubble_ns + stage.host_wait_ns);
      std::size_t actions = 0;
      for (const PassSpan& p : sim.graph.passes) actions += p.stage == lane.stage;
      EXPECT_EQ(passes.size(), actions);
    }
  }
}

// The elements the page opens and closes, in order, balanced: a stack of names; false and the
// first offending tag when one closes what is not open or something stays open.
std::string unbalanced_tag(const std::string& html) {
  static const std::set<std::string> kVoid{"meta", "br", "hr", "img", "input", "link"};
  std::vector<std::string> open;
  const std::regex tag(R"(<(/?)([a-zA-Z][a-zA-Z0-9]*)([^>]*)>)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[2];
    const std::string attributes = (*it)[3];
    if ((*it)[1] == "/") {
      if (open.empty() || open.back() != name) return "</" + name + "> at " + std::to_string(it->position());
      open.pop_back();
    } else if (!kVoid.count(name) && (attributes.empty() || attributes.back() != '/')) {
      open.push_back(name);
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

// The text between the first `from` and the next `to` after it.
std::string between(const std::string& text, const std::string& from, const std::string& to) {
  const std::size_t a = text.find(from);
  if (a == std::string::npos) return "";
  const std::size_t b = text.find(to, a + from.size());
  return text.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

class StepHtml : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const Case c = cases()[2];  // interleaved: several chunks per stage
    const ModelSpec model = testing::model_preset(c.model);
    const ClusterSpec cluster = testing::a100_cluster(c.spec.layout.gpus);
    const SimulatedStep sim = simulate_training_step(model, cluster, c.spec);
    html_ = new std::string(step_html(sim, model, cluster, c.spec, "test"));
    json_ = new Json(Json::parse(step_report_json(sim.report, model, cluster, c.spec, "test")));
    step_ns_ = sim.report.step_ns;
  }
  static std::string* html_;
  static Json* json_;
  static TimeNs step_ns_;
};
std::string* StepHtml::html_ = nullptr;
Json* StepHtml::json_ = nullptr;
TimeNs StepHtml::step_ns_ = 0;

TEST(StepHtmlHost, NamesTheHostsLaunchTimeAndDrawsItsWait) {
  Case c = cases().front();
  for (const Case& k : cases())
    if (std::string(k.name) == "moe, host launches") c = k;  // the MoE step with host launches of 40 us
  ASSERT_TRUE(c.spec.host_launch_ns.has_value());
  const ModelSpec model = testing::model_preset(c.model);
  const ClusterSpec cluster = testing::a100_cluster(c.spec.layout.gpus);
  const SimulatedStep sim = simulate_training_step(model, cluster, c.spec);
  const std::string html = step_html(sim, model, cluster, c.spec, "test");
  EXPECT_THAT(between(html, "data-table=\"layout\"", "</table>"), ::testing::HasSubstr("host time per launch (s)"));
  EXPECT_THAT(html, ::testing::HasSubstr("title=\"4e-05\""));  // the JSON's host_launch_s
  EXPECT_THAT(html, ::testing::HasSubstr("host wait"));
  EXPECT_GT(sim.report.stages[0].host_wait_ns, 0);
}

TEST_F(StepHtml, IsWellFormedAndSelfContained) {
  const std::string& html = *html_;
  EXPECT_EQ(unbalanced_tag(html), "");
  EXPECT_THAT(html, ::testing::StartsWith("<!DOCTYPE html>"));
  for (const char* external : {"src=", "href=", "@import", "url(", "<script", "<link"})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  // The one address is SVG's namespace, which loads nothing.
  std::string rest = std::regex_replace(html, std::regex("http://www\\.w3\\.org/2000/svg"), "");
  EXPECT_EQ(rest.find("http"), std::string::npos);
}

TEST_F(StepHtml, ShowsEveryNumberAsTheJsonHasIt) {
  const std::string& html = *html_;
  const Json& j = *json_;
  for (const char* key : {"step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "bubble_fraction",
                          "peak_memory_bytes", "memory_capacity_bytes", "memory_reserve_bytes", "tasks"})
    EXPECT_THAT(html, ::testing::HasSubstr("title=\"" + j[key].dump())) << key;
  EXPECT_THAT(html, ::testing::HasSubstr(j["flops_formula"].get<std::string>()));
  for (const auto& [key, value] : j["layout"].items())
    EXPECT_THAT(between(html, "data-table=\"layout\"", "</table>"),
                ::testing::HasSubstr("title=\"" + (value.is_string() ? value.get<std::string>() : value.dump()) + "\""))
        << key;
  ASSERT_EQ(j["stages"].size(), 4u);
  for (const Json& stage : j["stages"]) {
    const std::string row = between(html, "<tr data-stage=\"" + stage["stage"].dump() + "\">", "</tr>");
    ASSERT_FALSE(row.empty()) << stage["stage"];
    for (const auto& [key, value] : stage.items()) {
      const std::string unit = key.ends_with("_s") ? " s" : key.ends_with("_bytes") ? " bytes" : "";
      EXPECT_THAT(row, ::testing::HasSubstr("title=\"" + value.dump() + unit + "\"")) << key;
    }
  }
}

// The timeline's lanes: one per stage, each bar inside the axis and after the one before it.
TEST_F(StepHtml, DrawsOneTimelineLanePerStageWithBarsApartInsideTheAxis) {
  const std::string timeline = between(*html_, "data-plot=\"timeline\"", "</svg>");
  ASSERT_FALSE(timeline.empty());
  const std::regex frame(R"re(<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)" height="[0-9.]+" fill="#fafafa")re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(timeline, m, frame));
  const double left = std::stod(m[1]), right = left + std::stod(m[2]);
  const std::regex lane_re(R"re(<g data-lane="([0-9]+)")re");
  const std::regex bar_re(R"re(<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)")re");
  std::vector<std::string> lanes;
  for (auto it = std::sregex_iterator(timeline.begin(), timeline.end(), lane_re); it != std::sregex_iterator(); ++it)
    lanes.push_back((*it)[1]);
  EXPECT_EQ(lanes, (std::vector<std::string>{"0", "1", "2", "3"}));
  for (const std::string& lane : lanes) {
    const std::string bars = between(timeline, "<g data-lane=\"" + lane + "\"", "</g>");
    double previous_end = left;
    int count = 0;
    for (auto it = std::sregex_iterator(bars.begin(), bars.end(), bar_re); it != std::sregex_iterator(); ++it) {
      const double x = std::stod((*it)[1]), width = std::stod((*it)[2]);
      EXPECT_GE(x + 1e-9, previous_end) << "lane " << lane << " bar " << count;
      EXPECT_GT(width, 0);
      previous_end = x + width;
      ++count;
    }
    EXPECT_GT(count, 8 * 2 * 2) << lane;  // 8 microbatches, 2 chunks, F and B, and bubbles
    EXPECT_LE(previous_end, right + 1e-9) << lane;
  }
  // The step time's marker lies inside the axis.
  EXPECT_THAT(timeline, ::testing::HasSubstr(">step " + format_fixed(static_cast<double>(step_ns_) * 1e-9, 4) + " s<"));
}

}  // namespace
}  // namespace moesim
