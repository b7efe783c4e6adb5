// The HTML report is valid, self-contained, and has one heatmap cell per (layer, KV head).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analysis/compare_fixtures.h"
#include "analysis/report_html.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::kv {
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
  EXPECT_EQ(html.find("<script"), std::string::npos);
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
}

TEST(ReportHtml, CheckerCatchesBrokenPages) {
  // The checker must be able to fail, or the tests above prove nothing.
  const nlohmann::json c = check_html("<!DOCTYPE html><html><body><div><script src=\"http://x\"></script></body></html>");
  EXPECT_GE(c["problems"].size(), 2u) << c.dump();
}

}  // namespace
}  // namespace ember::kv
