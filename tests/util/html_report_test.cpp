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

// Issue 32: a saved report names its inputs, build and date under its title; a page built
// without a stamp (as the tests here build them) shows none.
TEST(HtmlReport, StampNamesInputsBuildAndDate) {
  const Stamp s{{{"model", "a<b>.gguf"}, {"prompts", "p.txt"}}, "ember 0.1.0 (build 3, commit abc1234)",
                "2026-12-04T22:40:00Z"};
  EXPECT_EQ(stamp_html(s),
            "<p class=\"stamp muted\">model <code>a&lt;b&gt;.gguf</code> &middot; prompts <code>p.txt</code> &middot; "
            "made by ember 0.1.0 (build 3, commit abc1234) on 2026-12-04T22:40:00Z</p>\n");
  EXPECT_NE(page_begin("t", s).find("</h1>\n<p class=\"stamp muted\">model"), std::string::npos);
  EXPECT_EQ(stamp_html({}), "");
  EXPECT_EQ(page_begin("t").find("stamp"), std::string::npos);
}

// Issue 32: the sweep's x axis, ticks every 0.25, read 0, 0.2, 0.5, 0.8, 1 (the labels had the
// step's magnitude in decimals, one, not its digits, two).
TEST(HtmlReport, TickLabelsHaveTheStepsDecimals) {
  const auto t = axis_ticks(0, 1, false, false, 5);
  std::vector<std::string> labels;
  for (const auto& [v, label] : t) labels.push_back(label);
  EXPECT_EQ(labels, (std::vector<std::string>{"0.00", "0.25", "0.50", "0.75", "1.00"}));
  EXPECT_EQ(axis_ticks(0, 0.05, false, false, 3)[1].second, "0.025");
  EXPECT_EQ(axis_ticks(0, 10, false, false, 3)[1].second, "5");
}

// The drawn point labels (x, y, anchor, text) of a chart's SVG, as boxes of the size the
// chart assumes (6.4 px a character, 12 px high).
struct LabelBox {
  double x0, y0, x1, y1;
  std::string text;
};
std::vector<LabelBox> point_labels(const std::string& svg) {
  std::vector<LabelBox> out;
  const std::regex re("<text x=\"([-0-9.]+)\" y=\"([-0-9.]+)\" text-anchor=\"(start|end)\" class=\"point-label\"[^>]*>([^<]*)</text>");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it) {
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]), w = 6.4 * double((*it)[4].length());
    const bool right = (*it)[3] == "start";
    out.push_back({right ? x : x - w, y - 12, right ? x + w : x, y, (*it)[4]});
  }
  return out;
}

// Issue 32: labels of nearby points overprinted into a blob (when none of the eight places
// around a point was free, the label went to the first anyway). Checked failing before: 528
// pairs of the 40 labels below overlapped.
TEST(HtmlReport, NoTwoPointLabelsOverlap) {
  Chart c;
  c.x.label = "x";
  c.y.label = "y";
  Series s{"dense", "#123456", {}, true, false};
  // Forty labelled points within 4 % of an axis that spans 0..1 (the unlabelled ends).
  s.points.push_back({0, 0, "", "", ""});
  for (int i = 0; i < 40; ++i)
    s.points.push_back({0.5 + 0.001 * i, 0.5 + 0.001 * (i % 7), "label" + std::to_string(i), "", ""});
  s.points.push_back({1, 1, "", "", ""});
  c.series.push_back(s);
  const std::string o = chart(c);
  const std::vector<LabelBox> boxes = point_labels(o);
  ASSERT_GE(boxes.size(), 4u) << o;  // room around the cluster for some
  for (size_t i = 0; i < boxes.size(); ++i)
    for (size_t j = i + 1; j < boxes.size(); ++j) {
      const LabelBox &a = boxes[i], &b = boxes[j];
      EXPECT_FALSE(a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1) << a.text << " over " << b.text;
    }
  // A label with no room is still there, in its point's hover title.
  for (int i = 0; i < 40; ++i) EXPECT_NE(o.find("label" + std::to_string(i)), std::string::npos) << i;
}

// Issue 32: a series equal to an earlier one hid it (same line, same dots on top).
TEST(HtmlReport, CoincidentSeriesStayVisible) {
  Chart c;
  c.x.label = "x";
  c.y.label = "y";
  for (const char* colour : {"#111111", "#222222", "#333333"}) {
    Series s{colour, colour, {}, true, false};
    s.points = {{0, 1, "", "", ""}, {1, 2, "", "", ""}};
    c.series.push_back(s);
  }
  c.series[2].points[1].y = 3;  // the third leaves the others at its second point
  const std::string o = chart(c);
  // (Each series' legend entry adds one filled dot.)
  EXPECT_EQ(count(o, "r=\"4\" fill=\"#111111\""), 3u) << o;          // the first: filled dots
  EXPECT_EQ(count(o, "r=\"6.5\" fill=\"none\" stroke=\"#222222\""), 2u) << o;  // rings around them
  EXPECT_EQ(count(o, "r=\"9.0\" fill=\"none\" stroke=\"#333333\""), 1u) << o;  // a wider ring
  EXPECT_EQ(count(o, "r=\"4\" fill=\"#333333\""), 2u) << o;          // its own point: a dot
  EXPECT_EQ(count(o, "stroke-dasharray"), 2u) << o;                  // both later lines dashed
}

}  // namespace
}  // namespace ember::html
