// The HTML report is valid, self-contained, and has one heatmap cell per (layer, KV head).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "analysis/compare_fixtures.h"
#include "analysis/report_html.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::analysis {
namespace {

nlohmann::json check_html(const std::string& html) {
  const std::string path = test::temp_dir("html") + "/report.html";
  write_file_atomic(path, html, false);
  std::string out;
  const int rc = test::run_command("/usr/bin/python3 " + std::string(EMBER_SOURCE_DIR) +
                                       "/tests/analysis/report_html_check.py " + path,
                                   &out);
  EXPECT_EQ(rc, 0) << out;
  return nlohmann::json::parse(out);
}

Diagnostics fake_diagnostics(int layers, int steps) {
  Diagnostics d;
  d.steps = steps;
  for (int s = 0; s < steps; ++s) {
    SameInputStep st;
    st.step = s;
    for (int l = 0; l < layers; ++l) st.attn_out.push_back(VectorCompare{1.0 - 1e-3 * l, 0.01, 0.1});
    st.logits = VectorCompare{0.999, 0.02, 0.5};
    st.logits_kl = 1e-3 * (s + 1);
    st.top1_left = 5;
    st.top1_right = s == 2 ? 6 : 5;
    d.same_input.steps.push_back(st);
  }
  d.greedy.left = {1, 2, 3};
  d.greedy.right = {1, 2, 4};
  d.greedy.first_divergence = 2;
  d.greedy.agreeing_prefix = 2;
  return d;
}

TEST(ReportHtml, OneCellPerLayerAndHeadInEachHeatmap) {
  const ComparedState a = testing::synthetic_state(5, 3, 4, 6, 1);
  const ComparedState b = testing::synthetic_state(5, 3, 4, 6, 2);
  CompareReport rep = compare_states(a, b, CompareOptions{});
  rep.diagnostics = fake_diagnostics(5, 4);
  const std::string html = report_html(rep);
  const nlohmann::json c = check_html(html);
  EXPECT_TRUE(c["problems"].empty()) << c.dump();
  for (const char* key : {"k.cosine", "v.cosine", "k.mse", "v.mse"}) {
    EXPECT_EQ(c["cells"][key], 15) << key;
    EXPECT_EQ(c["unique_cells"][key], 15) << key;
  }
  EXPECT_EQ(c["attn_cells"], 20);  // steps x layers
  EXPECT_EQ(c["legends"], 5);      // a colour legend under each heatmap (the checker fails one without)
  EXPECT_EQ(c["points"], 4 + 4 + 1);  // logit chart: 1 - cosine and KL per step, step 2's top-1 differs
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // Axes are named in layers, heads and steps.
  for (const char* axis : {">layer</text>", ">KV head</text>", ">decode step</text>"})
    EXPECT_NE(html.find(axis), std::string::npos) << axis;
}

// The figures are as large as their data: more layers make taller maps, more steps a taller
// attention map and a wider logit chart.
TEST(ReportHtml, FiguresAreSizedByTheirData) {
  auto sizes = [](int layers, int steps) {
    const ComparedState a = testing::synthetic_state(layers, 2, 4, 3, 1);
    const ComparedState b = testing::synthetic_state(layers, 2, 4, 3, 2);
    CompareReport rep = compare_states(a, b, CompareOptions{});
    rep.diagnostics = fake_diagnostics(layers, steps);
    const nlohmann::json c = check_html(report_html(rep));
    EXPECT_TRUE(c["problems"].empty()) << c.dump();
    std::map<std::string, std::pair<double, double>> m;
    for (const auto& s : c["sizes"]) m[s[0].get<std::string>()] = {s[1].get<double>(), s[2].get<double>()};
    return m;
  };
  auto small = sizes(2, 3), big = sizes(12, 20);
  EXPECT_GT(big["heatmap"].second, small["heatmap"].second + 200);
  EXPECT_GT(big["attn-heatmap"].second, small["attn-heatmap"].second + 300);
  EXPECT_GT(big["logit-chart"].first, small["logit-chart"].first);
  EXPECT_LE(small["heatmap"].second, 180);  // 2 layers x 2 heads: no empty chart space
  EXPECT_LE(small["heatmap"].first, 300);
}

TEST(ReportHtml, ValidWithoutDiagnosticsAndEscapesText) {
  ComparedState a = testing::synthetic_state(2, 2, 4, 3, 1);
  a.identity.provenance.emplace_back("note", "<b>&");
  a.identity.architecture = "<llama>";
  const ComparedState b = testing::copy_state(a);
  const std::string html = report_html(compare_states(a, b, CompareOptions{}));
  const nlohmann::json c = check_html(html);
  EXPECT_TRUE(c["problems"].empty()) << c.dump();
  EXPECT_EQ(c["cells"]["k.cosine"], 4);
  EXPECT_EQ(c["attn_cells"], 0);
  EXPECT_EQ(html.find("<llama>"), std::string::npos);
  EXPECT_NE(html.find("&lt;llama&gt;"), std::string::npos);
}

// A metric that could not be computed is an n/a cell, never a NaN coordinate.
TEST(ReportHtml, NonFiniteMetricsAreNaCellsNotCoordinates) {
  const ComparedState a = testing::synthetic_state(2, 2, 4, 3, 1);
  const ComparedState b = testing::synthetic_state(2, 2, 4, 3, 2);
  CompareReport rep = compare_states(a, b, CompareOptions{});
  rep.metrics.heads[0].k.cosine = std::nullopt;
  rep.diagnostics = fake_diagnostics(2, 3);
  rep.diagnostics->same_input.steps[1].logits.cosine = NAN;
  rep.diagnostics->same_input.steps[1].attn_out[0].cosine = NAN;
  const std::string html = report_html(rep);
  const nlohmann::json c = check_html(html);  // fails on any nan/inf attribute
  EXPECT_TRUE(c["problems"].empty()) << c.dump();
  EXPECT_NE(html.find("#3b3b3b"), std::string::npos);  // the n/a colour
}

TEST(ReportHtml, CheckerCatchesBrokenPages) {
  // The checker must be able to fail, or the tests above prove nothing.
  const nlohmann::json c = check_html("<!DOCTYPE html><html><body><div><script src=\"http://x\"></script></body></html>");
  EXPECT_GE(c["problems"].size(), 2u) << c.dump();
  // A heatmap without its legend, a cell without a title, a NaN coordinate: each one caught.
  const nlohmann::json d = check_html(
      "<!DOCTYPE html><html><body><svg class=\"heatmap\" data-part=\"k\" data-metric=\"cosine\">"
      "<rect class=\"cell\" data-layer=\"0\" data-head=\"0\" x=\"nan\"></rect></svg></body></html>");
  EXPECT_EQ(d["problems"].size(), 4u) << d.dump();  // + no axis names
}

}  // namespace
}  // namespace ember::analysis
