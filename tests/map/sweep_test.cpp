// The boundary sweep at reduced size on the real pairs: rows for every anchor, the exact
// hybrid bit-identical, the quantization pair labelled as such, a self-contained HTML report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "map/metrics.h"
#include "map/sweep.h"
#include "map/sweep_budget.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::map {
namespace {

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
  size_t svgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, 3u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_NE(r.table().find("exact-hybrid"), std::string::npos);
}

TEST(Sweep, F32ToQ8IsLabelledAQuantizationBoundary) {
  const SweepResult r = run_sweep(small("stories260K-Q8_0.gguf"));
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["label"], "quantization-boundary");
  EXPECT_NE(j["note"].get<std::string>().find("not a cross-model result"), std::string::npos);
  EXPECT_EQ(j["provenance"]["shared_layers"].get<int>(), 0);
  EXPECT_NE(r.html().find("quantization-boundary study, not a cross-model result"), std::string::npos);
}


// One reduced sweep checks the TTFT protocol fields and the budget's choice: the anchors
// subset, source prefill and stored-state load counted beside the handoff, the bytes handed
// over, and the cheapest configuration meeting the budget judged on calibration prompts.
TEST(Sweep, TtftCountsTheSourceAndTheStoredLoadAndTheBudgetPicksTheCheapest) {
  SweepOptions o = small("stories260K-kjv-top.gguf");
  o.anchors = {2, 5};  // the exact hybrid and pure mapping only
  o.work_dir = test::temp_dir("sweep-stored");
  o.budget = FidelityBudget::parse("kl<=0", "test");  // only exact configurations meet it
  o.budget_prompts = 3;
  const SweepResult r = run_sweep(o);
  const nlohmann::json j = r.to_json();
  ASSERT_EQ(j["rows"].size(), 4u);  // identity reuse, a = 2, a = 5, full prefill
  EXPECT_EQ(j["provenance"]["anchors"], nlohmann::json({2, 5}));
  EXPECT_TRUE(j["protocol"].contains("ttft_with_source"));
  EXPECT_NE(j["protocol"]["ttft_stored"].get<std::string>().find("read_state_dir"), std::string::npos);
  const int E = 64, G = 4, D = 8, L = 5;  // stories260K
  double prefix_tokens = 0;
  for (const auto& row : j["rows"]) {
    if (row["config"] == "full-prefill") {
      EXPECT_EQ(row["ttft_with_source_ratio"].get<double>(), 1.0);
      continue;
    }
    EXPECT_GT(row["source_prefill_seconds"].get<double>(), 0.0);
    EXPECT_GT(row["load_seconds"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(row["ttft_with_source_seconds"].get<double>(),
                     row["ttft_seconds"].get<double>() + row["source_prefill_seconds"].get<double>());
    EXPECT_DOUBLE_EQ(row["ttft_stored_seconds"].get<double>(),
                     row["ttft_seconds"].get<double>() + row["load_seconds"].get<double>());
    const int a = row["a"].get<int>();
    const double per_token = double(a) * G * D * 2 * 2 + (a > 0 && a < L ? E * 4.0 : 0.0);
    if (prefix_tokens == 0) prefix_tokens = row["handoff_bytes"].get<double>() / per_token;
    EXPECT_DOUBLE_EQ(row["handoff_bytes"].get<double>(), prefix_tokens * per_token) << row["config"];
  }
  EXPECT_GT(prefix_tokens, 4.0);
  // The pure-mapping source prefill runs through all layers, the exact hybrid's to layer 2 only.
  EXPECT_GT(j["rows"][2]["source_prefill_seconds"].get<double>(), j["rows"][1]["source_prefill_seconds"].get<double>());

  const nlohmann::json& c = j["choice"];
  EXPECT_EQ(c["budget"], "kl<=0");
  EXPECT_EQ(c["candidates"].size(), 4u);
  EXPECT_EQ(c["candidates"][0]["comparisons"].get<int>(), 3);
  EXPECT_EQ(c["chosen"]["config"], "anchor");
  EXPECT_EQ(c["chosen"]["a"].get<int>(), 2);  // exact, and cheaper than the full prefill
  EXPECT_EQ(c["calibration"]["mean_kl"].get<double>(), 0.0);
  EXPECT_EQ(c["held_out"]["agree"].get<int>(), 4);
  EXPECT_EQ(c["held_out"]["ttft_stored_ratio"].get<double>(), j["rows"][1]["ttft_stored_ratio"].get<double>());
  EXPECT_NE(c["judged_on"].get<std::string>().find("withheld from the fit"), std::string::npos);
  EXPECT_EQ(j["provenance"]["fit_prompts"].get<int>(), 24 - 3);
  EXPECT_NE(r.table().find("choice (kl<=0"), std::string::npos);
  // The scratch files of the stored-state timing are gone.
  EXPECT_TRUE(std::filesystem::is_empty(o.work_dir));
}

TEST(SweepBudget, ParsesTheThreeMetricsAndRefusesAnythingElse) {
  EXPECT_EQ(FidelityBudget::parse("kl<=0.01", "t").text(), "kl<=0.01");
  EXPECT_EQ(FidelityBudget::parse("rel<=1e-3", "t").metric, "rel");
  EXPECT_EQ(FidelityBudget::parse("agreement>=0.99", "t").threshold, 0.99);
  for (const char* bad : {"kl<0.1", "kl<=", "kl<=-1", "kl<=nan", "agreement>=1.5", "rel>=0.1", "kl<=0.1x", "x"})
    EXPECT_NE(test::error_of([&] { FidelityBudget::parse(bad, "t"); }).find("--fidelity-budget"), std::string::npos)
        << bad;
}

TEST(SweepBudget, CheapestByWorkThenMappingAndNoneWhenNothingMeetsIt) {
  auto cand = [](const char* name, int a, double saved, double mapping, double kl) {
    BudgetCandidate c;
    c.config = name, c.a = a, c.work_saved = saved, c.mapping_macs = mapping;
    c.comparisons = 2, c.agree = 2, c.sum_kl = 2 * kl;
    return c;
  };
  const std::vector<BudgetCandidate> c = {cand("identity-reuse", 5, 1.0, 0, 0.5), cand("anchor", 2, 0.6, 0, 0.0),
                                          cand("anchor", 4, 0.9, 10, 0.02), cand("anchor", 5, 1.0, 20, 0.04),
                                          cand("full-prefill", 0, 0.0, 0, 0.0)};
  EXPECT_EQ(choose_cheapest(c, FidelityBudget::parse("kl<=0.03", "t")), 2);
  EXPECT_EQ(choose_cheapest(c, FidelityBudget::parse("kl<=0.05", "t")), 3);
  EXPECT_EQ(choose_cheapest(c, FidelityBudget::parse("kl<=1", "t")), 0);  // same work, no mapping
  EXPECT_EQ(choose_cheapest(c, FidelityBudget::parse("kl<=0", "t")), 1);
  std::vector<BudgetCandidate> nan = {cand("anchor", 5, 1.0, 0, std::nan(""))};
  EXPECT_EQ(choose_cheapest(nan, FidelityBudget::parse("kl<=1", "t")), -1);
}

TEST(Sweep, AnAnchorOutsideTheSharedRangeIsRefused) {
  SweepOptions o = small("stories260K-kjv-top.gguf");
  o.n_calib = 4;
  o.n_eval = 1;
  o.anchors = {1};
  EXPECT_NE(test::error_of([&] { run_sweep(o); }).find("--anchors: expected each in [s, L] = [2, 5], found 1"),
            std::string::npos);
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
