// The HTML reports in a real browser: `moesim sweep --html` on tests/html/report-sweep.yaml and
// `moesim simulate --global-batch --html` of a small MoE step, each page loaded in headless
// Chromium with --dump-dom. Two scripts are spliced into a copy of the page: a recorder at the top
// of <head> (window errors, failed loads, unhandled rejections, console.error and console.warn)
// and a probe at the end of <body>, after the page's own script, which measures what the browser
// drew (plots with a size, markers and bars with tooltips, lanes, text outside its chart, legend
// entries past the page's edge), works the sweep's model filter, and writes its findings as JSON
// into the DOM that --dump-dom prints. Chromium's own log (--enable-logging=stderr) must hold no
// console message either. The sweep's expected counts come from its JSON, so the test follows
// the grid file. Skipped when no Chromium is installed (Debian: apt-get install chromium; or set
// MOESIM_CHROMIUM).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace {

using namespace moesim::cli_test;
using nlohmann::json;

// MOESIM_CHROMIUM, or the first Chromium on PATH; empty when there is none.
std::string find_chromium() {
  if (const char* given = std::getenv("MOESIM_CHROMIUM"); given != nullptr && *given != '\0') return given;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path == nullptr ? "" : path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
      const fs::path candidate = fs::path(dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "";
}

constexpr const char* kRecorder = R"(<script>
window.__probe = {errors: []};
(function () {
  function record(kind, text) { window.__probe.errors.push(kind + ': ' + text); }
  window.addEventListener('error', function (e) {
    var target = e.target && (e.target.src || e.target.href);
    record('error', e.message || ('failed to load ' + (target || 'a resource')));
  }, true);
  window.addEventListener('unhandledrejection', function (e) { record('unhandled rejection', String(e.reason)); });
  ['error', 'warn'].forEach(function (level) {
    var original = console[level];
    console[level] = function () {
      record('console.' + level, Array.prototype.join.call(arguments, ' '));
      original.apply(console, arguments);
    };
  });
})();
</script>
)";

constexpr const char* kProbe = R"(<script>
(function () {
  var p = window.__probe;
  p.plots = {};
  p.overflow = [];
  document.querySelectorAll('svg[data-plot]').forEach(function (svg) {
    var kind = svg.getAttribute('data-plot');
    var k = p.plots[kind] = p.plots[kind] || {drawn: 0, markers: 0, bars: 0, lanes: 0};
    var box = svg.getBoundingClientRect();
    if (box.width > 0 && box.height > 0) k.drawn += 1;
    k.markers += svg.querySelectorAll('circle > title').length;
    k.bars += svg.querySelectorAll('rect > title').length;
    k.lanes += svg.querySelectorAll('g[data-lane]').length;
    svg.querySelectorAll('text').forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
        p.overflow.push(kind + ': ' + t.textContent);
    });
  });
  function visible(kind) {
    var n = 0;
    document.querySelectorAll('figure.plot').forEach(function (f) {
      if (f.getBoundingClientRect().height > 0 && f.querySelector('svg[data-plot="' + kind + '"]')) n += 1;
    });
    return n;
  }
  // A legend entry beyond the page's right edge would be cut.
  p.legend_cut = 0;
  document.querySelectorAll('.legend span').forEach(function (e) {
    if (e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5) p.legend_cut += 1;
  });
  var form = document.getElementById('filters');
  p.filters_shown = !!form && !form.hidden;
  var select = form && form.querySelector('select[name="model"]');
  if (select && select.options.length > 1) {
    select.value = select.options[1].value;
    select.dispatchEvent(new Event('change', {bubbles: true}));
    p.filtered = {model: select.value, step: visible('step-vs-n'), pareto: visible('pareto')};
    select.value = '';
    select.dispatchEvent(new Event('change', {bubbles: true}));
    p.unfiltered_step = visible('step-vs-n');
  }
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify(p);
  document.body.appendChild(out);
})();
</script>
)";

// The report with the recorder first in <head> and the probe last in <body>.
std::string probed(std::string page) {
  const auto head = page.find("<head>");
  const auto body_end = page.rfind("</body>");
  if (head == std::string::npos || body_end == std::string::npos) return "";
  page.insert(body_end, kProbe);
  page.insert(head + 6, kRecorder);
  return page;
}

// The probe's JSON from the dumped DOM (its text is HTML-escaped there).
json probe_of(const std::string& dom) {
  const std::string open = "<pre id=\"probe\">";
  const auto begin = dom.find(open);
  if (begin == std::string::npos) return json();
  const auto end = dom.find("</pre>", begin);
  std::string text = dom.substr(begin + open.size(), end - begin - open.size());
  const std::pair<std::string, std::string> entities[] = {{"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}};
  for (const auto& [entity, c] : entities) {
    for (auto at = text.find(entity); at != std::string::npos; at = text.find(entity, at + 1))
      text.replace(at, entity.size(), c);
  }
  return json::parse(text, nullptr, false);
}

// The number of distinct values of fields of the JSON's entries.
template <typename... Keys>
std::size_t distinct(const json& entries, Keys... keys) {
  std::set<std::vector<std::string>> seen;
  for (const json& e : entries) seen.insert({e[keys].dump()...});
  return seen.size();
}

class HtmlReport : public Cli {
 protected:
  // The page with the recorder and the probe, loaded in headless Chromium: the probe's findings,
  // after the checks every page passes (no error, no console message, no text out of its chart,
  // no legend cut).
  json probe_page(const std::string& chromium, const fs::path& html) {
    const fs::path page = write("probed.html", probed(read_file(html)));
    EXPECT_GT(fs::file_size(page), 0u) << "the report has no <head> or </body>";
    const fs::path dom = dir_ / "dom.html", log = dir_ / "chromium.log";
    const std::string cmd = "timeout -k 5 60 " + chromium +
                            " --headless --no-sandbox --disable-gpu --no-first-run --no-default-browser-check"
                            " --disable-extensions --disable-dev-shm-usage --host-resolver-rules='MAP * ~NOTFOUND'"
                            " --window-size=1400,1000 --enable-logging=stderr --v=0 --user-data-dir=" +
                            (dir_ / "profile").string() + " --dump-dom file://" + page.string() + " >" +
                            dom.string() + " 2>" + log.string();
    const int status = std::system(cmd.c_str());
    EXPECT_EQ(status, 0) << cmd << "\n" << read_file(log);
    const json probe = probe_of(read_file(dom));
    EXPECT_TRUE(probe.is_object()) << "the probe did not run; chromium log:\n" << read_file(log);
    if (!probe.is_object()) return probe;
    EXPECT_TRUE(probe["errors"].empty()) << probe["errors"].dump(2);
    EXPECT_EQ(read_file(log).find(":CONSOLE"), std::string::npos) << read_file(log);
    EXPECT_TRUE(probe["overflow"].empty()) << "text outside its chart: " << probe["overflow"].dump(2);
    EXPECT_EQ(probe["legend_cut"], 0);
    return probe;
  }
};

TEST_F(HtmlReport, LoadsInHeadlessChromiumWithEveryPlotAndNoError) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "no Chromium installed (Debian: apt-get install chromium; or set MOESIM_CHROMIUM)";
  const fs::path html = dir_ / "report.html", report_json = dir_ / "report.json";
  const Result sweep = run("sweep --grid tests/html/report-sweep.yaml --jobs 2 --html " + html.string() + " --json " +
                           report_json.string());
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  const json j = json::parse(read_file(report_json));
  const json probe = probe_page(chromium, html);
  ASSERT_TRUE(probe.is_object());

  // Every view drawn, one plot per group, workload or (model, hardware); the markers with a tooltip
  // are every configuration (and, in the step plots, each group's outlined best).
  const json& groups = j["best_per_group"];
  std::size_t fitting_groups = 0;
  for (const json& g : groups) fitting_groups += g["best_record"].is_null() ? 0 : 1;
  json shared_batches = json::array();  // a layouts plot per model, hardware and routing of these
  for (const json& b : j["best_layout_per_batch"]) {
    if (b["layouts"].size() > 1) shared_batches.push_back(b);
  }
  const std::size_t layout_charts = distinct(shared_batches, "model", "hardware", "routing");
  const json& plots = probe["plots"];
  ASSERT_GT(groups.size(), 12u) << "the sweep should have more groups than the report once plotted";
  EXPECT_EQ(plots["step-vs-n"]["drawn"], groups.size());
  EXPECT_EQ(plots["step-vs-n"]["markers"], j["records"].size() + fitting_groups);
  EXPECT_EQ(plots["pareto"]["drawn"], j["pareto_per_workload"].size());
  EXPECT_EQ(plots["pareto"]["markers"], j["records"].size());
  EXPECT_EQ(plots["best-n"]["drawn"], distinct(groups, "model", "hardware"));
  EXPECT_GT(layout_charts, 0u);
  EXPECT_EQ(plots["layouts"]["drawn"], layout_charts);
  EXPECT_EQ(plots["capacity-throughput"]["drawn"], distinct(j["capacity_curve"], "model", "hardware"));
  EXPECT_EQ(plots["capacity-headroom"]["drawn"], distinct(j["capacity_curve"], "model", "hardware"));
  EXPECT_EQ(plots.size(), 6u) << plots.dump(2);

  // The filter: shown by the script, and choosing a model leaves that model's plots.
  EXPECT_TRUE(probe["filters_shown"]);
  ASSERT_TRUE(probe.contains("filtered")) << probe.dump(2);
  std::size_t of_model = 0;
  for (const json& g : groups) of_model += g["model"] == probe["filtered"]["model"] ? 1 : 0;
  EXPECT_EQ(probe["filtered"]["step"], of_model);
  EXPECT_GT(probe["filtered"]["pareto"], 0);
  EXPECT_EQ(probe["unfiltered_step"], groups.size());
}

// The whole step's report: its three charts drawn, one timeline lane per pipeline stage, a tooltip
// on every bar.
TEST_F(HtmlReport, StepReportLoadsInHeadlessChromiumWithEveryChartAndNoError) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "no Chromium installed (Debian: apt-get install chromium; or set MOESIM_CHROMIUM)";
  const fs::path html = dir_ / "step.html";
  const Result step = run("simulate --model qwen3-30b-a3b --hardware dgx-h100-ndr --gpus 16 --tp 2 --pp 2 --ep 4 "
                          "--global-batch 64 --seq 4096 --sequence-parallel --schedule zb-h1 --html " + html.string());
  ASSERT_EQ(step.exit_code, 0) << step.err;
  const json probe = probe_page(chromium, html);
  ASSERT_TRUE(probe.is_object());
  const json& plots = probe["plots"];
  EXPECT_EQ(plots.size(), 3u) << plots.dump(2);
  for (const char* kind : {"stage-times", "stage-memory", "timeline"}) {
    EXPECT_EQ(plots[kind]["drawn"], 1) << kind;
    EXPECT_EQ(plots[kind]["lanes"], 2) << kind;  // pp 2
  }
  EXPECT_EQ(plots["stage-times"]["bars"], 2 * 6);
  EXPECT_EQ(plots["stage-memory"]["bars"], 2 * 2);
  // 16 microbatches: F, Bi and W of each on each stage, and bubbles between them.
  EXPECT_GT(plots["timeline"]["bars"], 2 * 16 * 3);
}

}  // namespace
