// The boundary sweep at reduced size on the real pairs: rows for every anchor, the exact
// hybrid bit-identical, the quantization pair labelled as such, a self-contained HTML report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>

#include "map/metrics.h"
#include "map/sweep.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::map {
namespace {

nlohmann::json check_html(const std::string& html) {
  const std::string path = test::temp_dir("sweep-html") + "/sweep.html";
  write_file_atomic(path, html, false);
  std::string out;
  EXPECT_EQ(test::run_command("/usr/bin/python3 " + std::string(EMBER_SOURCE_DIR) +
                                  "/tests/analysis/report_html_check.py " + path, &out), 0) << out;
  return nlohmann::json::parse(out);
}

SweepOptions small(const std::string& target) {
  SweepOptions o;
  o.source_path = test::shared_path("models/stories260K.gguf");
  o.target_path = test::shared_path("models/" + target);
  o.prompts_path = test::shared_path("models/prompts-stories-kjv.txt");
  o.n_calib = 24;
  o.n_eval = 4;
  o.greedy_steps = 4;
  o.timing_repeats = 1;
  return o;
}

TEST(Sweep, BaseToKjvAtReducedSize) {
  const SweepResult r = run_sweep(small("stories260K-kjv-top.gguf"));
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["label"], "cross-model");
  EXPECT_EQ(j["provenance"]["shared_layers"].get<int>(), 2);
  // identity reuse, a = 2..5, full prefill.
  ASSERT_EQ(j["rows"].size(), 6u);
  const auto& hybrid = j["rows"][1];
  EXPECT_TRUE(hybrid["exact_hybrid"].get<bool>());
  EXPECT_EQ(hybrid["a"].get<int>(), 2);
  EXPECT_EQ(hybrid["bit_identical"].get<int>(), 4);
  EXPECT_EQ(hybrid["greedy_exact"].get<int>(), 4);
  EXPECT_EQ(hybrid["mean_rel_logit_error"].get<double>(), 0.0);
  EXPECT_TRUE(j["rows"][4]["pure_mapping"].get<bool>());
  EXPECT_GT(j["rows"][4]["mean_rel_logit_error"].get<double>(), 0.0);
  const std::string html = r.html();
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  const nlohmann::json c = check_html(html);
  EXPECT_TRUE(c["problems"].empty()) << c.dump();
  // Two trade-off charts (fidelity against TTFT) and three against the anchor.
  EXPECT_EQ(c["svgs"].get<int>(), 5);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  // The trade-off: one point per configuration (6 rows) in each of its four series, each
  // labelled by its boundary.
  size_t tradeoff = html.find("class=\"chart tradeoff\"");
  ASSERT_NE(tradeoff, std::string::npos);
  for (const char* label : {">identity</text>", ">hybrid a=2</text>", ">a=3</text>", ">mapped a=5</text>",
                            ">full prefill</text>"})
    EXPECT_NE(html.find(label, tradeoff), std::string::npos) << label;
  EXPECT_NE(html.find("TTFT / full target prefill (source prefill not counted)"), std::string::npos);
  EXPECT_NE(r.table().find("exact-hybrid"), std::string::npos);
}

// --kind ridge: plain ridge maps (no bias, penalty toward 0; the ridge pilot of seed 000),
// recorded as such; --label same-base is carried into the report.
TEST(Sweep, PlainRidgeKindAndSameBaseLabelAreRecorded) {
  SweepOptions o = small("stories260K-kjv-top.gguf");
  o.kind = "ridge";
  o.label = "same-base";
  const SweepResult r = run_sweep(o);
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["kind"], "ridge");
  EXPECT_EQ(j["label"], "same-base");
  EXPECT_NE(j["note"].get<std::string>().find("sharing a base"), std::string::npos);
  EXPECT_EQ(j["provenance"]["mapper"]["kind"], "ridge");
  EXPECT_FALSE(j["provenance"]["mapper"]["anchor_identity"].get<bool>());
  EXPECT_EQ(j["rows"][1]["bit_identical"].get<int>(), 4);  // the exact hybrid needs no map
  EXPECT_NE(r.table().find("ridge maps"), std::string::npos);
  EXPECT_NE(r.html().find("ridge mapper"), std::string::npos);
  const SweepResult affine = run_sweep(small("stories260K-kjv-top.gguf"));
  EXPECT_EQ(affine.to_json()["kind"], "affine");
  EXPECT_NE(affine.provenance["mapper"]["hash"], r.provenance["mapper"]["hash"]);
  EXPECT_NE(affine.rows[4].mean_rel_err, r.rows[4].mean_rel_err);  // pure mapping differs
  o.kind = "neural";
  EXPECT_THROW(run_sweep(o), Error);
}

// The CLI takes --kind and every relation label, and shows progress when asked to
// (EMBER_PROGRESS=1: the status lines of collect, fit and eval on stderr).
TEST(Sweep, CliKindLabelAndProgress) {
  const std::string dir = test::temp_dir("sweep_cli");
  std::string out;
  const std::string cmd = "EMBER_PROGRESS=1 " + test::ember_binary() + " study sweep --source " +
                          test::shared_path("models/stories260K.gguf") + " --target " +
                          test::shared_path("models/stories260K-kjv-top.gguf") + " --prompts " +
                          test::shared_path("models/prompts-stories-kjv.txt") +
                          " --split 12:2 --greedy-steps 2 --repeats 1 --kind ridge --label same-base --json " + dir +
                          "/s.json";
  ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
  EXPECT_NE(out.find("sweep (same-base, ridge maps)"), std::string::npos) << out;
  for (const char* line : {"sweep collect", "sweep fit", "sweep eval"}) EXPECT_NE(out.find(line), std::string::npos) << line;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/s.json"))["kind"], "ridge");
  EXPECT_NE(test::run_command(test::ember_binary() + " study sweep --source x --target y --prompts z --kind neural",
                              &out), 0);
}

TEST(Sweep, F32ToQ8IsLabelledAQuantizationBoundary) {
  const SweepResult r = run_sweep(small("stories260K-Q8_0.gguf"));
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["label"], "quantization-boundary");
  EXPECT_NE(j["note"].get<std::string>().find("not a cross-model result"), std::string::npos);
  EXPECT_EQ(j["provenance"]["shared_layers"].get<int>(), 0);
  EXPECT_NE(r.html().find("quantization-boundary study, not a cross-model result"), std::string::npos);
}

}  // namespace
}  // namespace ember::map

namespace ember::map {
namespace {

// The studies' logit KL is util/kl.h's KL(reference || candidate): reference (0, log 3) is
// p = (1/4, 3/4), candidate (0, 0) is q = (1/2, 1/2), KL = 1/4 log(1/2) + 3/4 log(3/2).
TEST(LogitMetrics, KlIsTargetOverCandidate) {
  const float ref[2] = {0.0f, float(std::log(3.0))};
  const float x[2] = {0.0f, 0.0f};
  const LogitComparison c = compare_logits(x, ref, 2);
  EXPECT_NEAR(c.kl, 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 2e-8);
  EXPECT_EQ(compare_logits(ref, ref, 2).kl, 0.0);
}

}  // namespace
}  // namespace ember::map
