// The shared report primitives (util/html_report.h): a heatmap has its legend with values, a
// hover title on every cell and named, ticked axes, and grows with its grid; a chart draws
// no non-finite coordinate and takes its range from its data; everything is escaped.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>

#include "util/html_report.h"

namespace ember::html {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

int attr(const std::string& svg, const std::string& name) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex("<svg[^>]* " + name + "=\"([0-9]+)\""))) << name;
  return m.empty() ? -1 : std::stoi(m[1]);
}

Heatmap grid(int rows, int cols) {
  Heatmap h;
  h.caption = "K <cosine> & co";
  h.row_axis = "layer";
  h.col_axis = "KV head";
  h.scale = {1e-9, 1, true, "1 - cosine"};
  for (int r = 0; r < rows; ++r) h.row_ticks.push_back(std::to_string(r));
  for (int c = 0; c < cols; ++c) h.col_ticks.push_back(std::to_string(c));
  for (int i = 0; i < rows * cols; ++i) {
    HeatCell c;
    c.value = std::pow(10.0, -(i % 10));
    c.title = "cell " + std::to_string(i) + " <value>";
    h.cells.push_back(c);
  }
  return h;
}

TEST(HtmlReport, HeatmapHasLegendTitlesAndAxes) {
  Heatmap h = grid(3, 2);
  h.cells[0].exact = true;
  h.cells[1].value = NAN;  // n/a, never a coordinate
  const std::string s = heatmap(h);
  EXPECT_EQ(count(s, "<rect class=\"cell\""), 6u);
  EXPECT_EQ(count(s, "<title>cell "), 6u);  // every cell has its hover value
  EXPECT_NE(s.find("<g class=\"legend\">"), std::string::npos);
  // The legend shows values: the decades of the scale, and the special swatches.
  for (const char* tick : {">1e-9<", ">1e-6<", ">0.001<", ">1<", ">bit-identical<", ">n/a<"})
    EXPECT_NE(s.find(tick), std::string::npos) << tick;
  EXPECT_NE(s.find("1 - cosine (log scale)"), std::string::npos);
  EXPECT_NE(s.find(">layer</text>"), std::string::npos);
  EXPECT_NE(s.find(">KV head</text>"), std::string::npos);
  EXPECT_NE(s.find(std::string("fill=\"") + kExactColour), std::string::npos);
  EXPECT_NE(s.find(std::string("fill=\"") + kMissingColour), std::string::npos);
  EXPECT_EQ(s.find("nan"), std::string::npos);
  EXPECT_EQ(s.find("<value>"), std::string::npos);  // titles escaped
  EXPECT_NE(s.find("K &lt;cosine&gt; &amp; co"), std::string::npos);
}

TEST(HtmlReport, HeatmapSizeFollowsItsGrid) {
  const std::string small = heatmap(grid(2, 2)), tall = heatmap(grid(24, 2)), wide = heatmap(grid(4, 16));
  EXPECT_GT(attr(tall, "height"), attr(small, "height") + 300);
  EXPECT_LT(std::abs(attr(tall, "width") - attr(small, "width")), 20);  // the legend sets a narrow grid's width
  EXPECT_GT(attr(wide, "width"), attr(small, "width"));
  // A grid of hundreds of rows shrinks its cells instead of growing without bound...
  const std::string huge = heatmap(grid(400, 8));
  EXPECT_LE(attr(huge, "height"), 400 * 6 + 120);
  // ...and labels every k-th row so tick labels never overlap.
  EXPECT_EQ(count(huge, "text-anchor=\"end\">"), 400u / 3 + 1);
}

TEST(HtmlReport, ColourScaleIsOrderedAndClamped) {
  const ColourScale s{1e-6, 1, true, "x"};
  EXPECT_EQ(s.position(1e-6), 0.0);
  EXPECT_EQ(s.position(1), 1.0);
  EXPECT_NEAR(s.position(1e-3), 0.5, 1e-12);
  EXPECT_EQ(s.position(1e-20), 0.0);
  EXPECT_EQ(s.position(0), 0.0);
  EXPECT_EQ(s.position(NAN), 0.0);
  EXPECT_EQ(s.colour(5), s.colour(1));
  EXPECT_EQ(s.colour(1e-6), "#ffffcc");
  EXPECT_EQ(s.colour(1), "#800026");
  EXPECT_NE(s.colour(1e-3), s.colour(1e-2));
}

TEST(HtmlReport, TicksAreRoundNumbersInsideTheRange) {
  auto t = axis_ticks(0, 1, false, false, 6);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[1].second, "0.2");
  EXPECT_EQ(t.back().second, "1.0");
  t = axis_ticks(2, 5, false, true, 6);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].second, "2");
  t = axis_ticks(1e-12, 1, true, false, 5);
  ASSERT_EQ(t.size(), 5u);  // every third decade
  EXPECT_EQ(t[0].second, "1e-12");
  EXPECT_EQ(t.back().second, "1");
  EXPECT_TRUE(axis_ticks(NAN, 1, false, false).empty());
  EXPECT_TRUE(axis_ticks(0, 1, true, false).empty());
}

TEST(HtmlReport, ChartSkipsNonFinitePointsAndLabelsAxes) {
  Chart c;
  c.caption = "fidelity <vs> cost";
  c.x.label = "TTFT ratio";
  c.y.label = "KL";
  c.y.log = true;
  Series s{"KL & co", "#123456", {}, false, false};
  s.points.push_back({0.2, 1e-3, "a=3", "", ""});
  s.points.push_back({0.5, 1e-1, "<hybrid>", "", ""});
  s.points.push_back({NAN, 1e-2, "bad x", "", ""});
  s.points.push_back({0.3, 0.0, "zero on log", "", ""});
  s.points.push_back({0.4, INFINITY, "inf", "", ""});
  c.series.push_back(s);
  const std::string o = chart(c);
  EXPECT_EQ(count(o, "<circle class=\"point\""), 2u);
  EXPECT_EQ(count(o, "<title>"), 2u);
  EXPECT_EQ(o.find("nan"), std::string::npos);
  EXPECT_EQ(o.find("inf\""), std::string::npos);
  EXPECT_NE(o.find(">a=3</text>"), std::string::npos);
  EXPECT_NE(o.find("&lt;hybrid&gt;"), std::string::npos);
  EXPECT_NE(o.find(">KL &amp; co</text>"), std::string::npos);  // the legend names the series
  EXPECT_NE(o.find(">TTFT ratio</text>"), std::string::npos);
  EXPECT_NE(o.find(">KL (log)</text>"), std::string::npos);
  // The y range follows the data: decades 1e-3 .. 1e-1, not a fixed 1e-9 .. 1.
  EXPECT_NE(o.find(">0.001</text>"), std::string::npos);
  EXPECT_NE(o.find(">0.1</text>"), std::string::npos);
  EXPECT_EQ(o.find(">1e-9</text>"), std::string::npos);
  EXPECT_EQ(o.find(">1</text>"), std::string::npos);
}

TEST(HtmlReport, ChartOfNothingStillDrawsFiniteAxes) {
  Chart c;
  c.x.label = "x";
  c.y.label = "y";
  c.series.push_back({"empty", "#000", {}, true, false});
  const std::string o = chart(c);
  EXPECT_EQ(o.find("nan"), std::string::npos);
  EXPECT_EQ(count(o, "<circle class=\"point\""), 0u);
}

TEST(HtmlReport, TableEscapesHeaderAndAlignsNumbers) {
  const std::string t = table({{"name", "<v>"}, {{"a", "1"}, {"b", "2"}}, {false, true}, ""});
  EXPECT_NE(t.find("<th class=\"num\">&lt;v&gt;</th>"), std::string::npos);
  EXPECT_EQ(count(t, "<td class=\"num\">"), 2u);
  EXPECT_EQ(escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
  EXPECT_EQ(num(NAN), "n/a");
}

TEST(HtmlReport, PageIsSelfContained) {
  const std::string p = page_begin("<t>") + page_end();
  EXPECT_EQ(p.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(p.find("<script"), std::string::npos);
  EXPECT_EQ(p.find("http"), std::string::npos);
  EXPECT_EQ(p.find("<t>"), std::string::npos);
}

}  // namespace
}  // namespace ember::html
