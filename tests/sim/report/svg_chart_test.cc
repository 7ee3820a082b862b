// The SVG chart of the HTML reports: legends that widen the chart instead of being cut, tooltips,
// faded and outlined markers, base-2 axes ticked at the data, fixed number formats.
#include "sim/report/svg_chart.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace moesim {
namespace {

Series line(const std::string& name, std::vector<ChartPoint> points) {
  Series s;
  s.name = name;
  s.color = "#1f77b4";
  s.points = std::move(points);
  return s;
}

double attribute(const std::string& svg, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const auto at = svg.find(key);
  return at == std::string::npos ? -1 : std::stod(svg.substr(at + key.size()));
}

TEST(SvgChartTest, ALongLegendWidensTheChartAndWraps) {
  ChartStyle style;
  style.plot = "p";
  style.width = 300;
  style.height = 200;
  const std::string wide(60, 'x');  // 60 characters need more than 300 px
  const std::string svg = svg_chart("x", "y", {line(wide, {{1, 1, true, ""}, {2, 2, true, ""}})}, style);
  EXPECT_GT(attribute(svg, "width"), 60 * 7.0);
  EXPECT_NE(svg.find(">" + wide + "</text>"), std::string::npos);
  // Five names of 30 characters take several rows below the axes: the chart grows in height.
  std::vector<Series> five;
  for (int i = 0; i < 5; ++i) {
    five.push_back(line(std::string(29, 'a') + std::to_string(i), {{1, 1, true, ""}}));
    five.back().color = palette_color(static_cast<std::size_t>(i));
  }
  const std::string rows = svg_chart("x", "y", five, style);
  EXPECT_EQ(attribute(rows, "width"), 300);
  EXPECT_GE(attribute(rows, "height"), 200 + 5 * 16);  // one name a row at this width
}

TEST(SvgChartTest, MarkersCarryEscapedTooltipsAndStyles) {
  ChartStyle style;
  style.plot = "p";
  Series faded = line("context", {{1, 1, true, "a < b & \"c\""}});
  faded.faded = true;
  Series front = line("front", {{2, 2, false, "front"}});
  front.emphasis = true;
  const std::string svg = svg_chart("x", "y", {front, faded}, style);
  EXPECT_NE(svg.find("<title>a &lt; b &amp; &quot;c&quot;</title></circle>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("fill-opacity=\"0.3\""), std::string::npos);
  // The outlined marker is hollow (not filled), dark-edged and drawn after the faded one.
  const auto outlined = svg.find("r=\"4.5\" fill=\"white\" stroke=\"#000\" stroke-width=\"1.5\"><title>front");
  ASSERT_NE(outlined, std::string::npos) << svg;
  EXPECT_LT(svg.find("<title>a &lt;"), outlined);
  EXPECT_NE(svg.find("data-plot=\"p\""), std::string::npos);
}

TEST(SvgChartTest, Base2AxisIsTickedAtTheDataAndLabelsKeepTheirDecimals) {
  ChartStyle style;
  style.log2_x = true;
  const std::string svg = svg_chart("GPUs", "y", {line("s", {{8, 0.5, true, ""}, {24, 1.5, true, ""}})}, style);
  EXPECT_NE(svg.find(">8</text>"), std::string::npos);
  EXPECT_NE(svg.find(">24</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">16</text>"), std::string::npos);  // no tick where there is no data
  EXPECT_NE(svg.find(">0.5</text>"), std::string::npos);  // y ticks 0.0, 0.5, 1.0, 1.5
  EXPECT_NE(svg.find(">1.0</text>"), std::string::npos);
  EXPECT_EQ(svg, svg_chart("GPUs", "y", {line("s", {{8, 0.5, true, ""}, {24, 1.5, true, ""}})}, style));
  EXPECT_NE(svg_chart("x", "y", {}, style).find("no data"), std::string::npos);
}

}  // namespace
}  // namespace moesim
