// The boundary sweep at reduced size on the real pairs: rows for every anchor, the exact
// hybrid bit-identical, the quantization pair labelled as such, a self-contained HTML report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "map/metrics.h"
#include "map/sweep.h"
#include "map/sweep_budget.h"
#include "support/cli_run.h"
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
  // labelled by its boundary: beside the point, or (no free place there: the points move with
  // the measured times) first in its hover title.
  size_t tradeoff = html.find("class=\"chart tradeoff\"");
  ASSERT_NE(tradeoff, std::string::npos);
  for (const std::string label : {"identity", "hybrid a=2", "a=3", "mapped a=5", "full prefill"})
    EXPECT_TRUE(html.find(">" + label + "</text>", tradeoff) != std::string::npos ||
                html.find("<title>" + label + " (", tradeoff) != std::string::npos)
        << label;
  // The rows carry ttft_with_source_ratio, so the trade-off plots the TTFT that counts the
  // source's prefill, and its axis says so.
  EXPECT_NE(html.find("TTFT incl. source prefill / full target prefill"), std::string::npos);
  EXPECT_EQ(html.find("source prefill not counted)"), std::string::npos);
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
                          " --split 12:2 --greedy-steps 2 --repeats 1 --kind ridge --label same-base --json-out " + dir +
                          "/s.json --html " + dir + "/s.html";
  ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
  EXPECT_NE(out.find("sweep (same-base, ridge maps)"), std::string::npos) << out;
  for (const char* line : {"sweep collect", "sweep fit", "sweep eval"}) EXPECT_NE(out.find(line), std::string::npos) << line;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/s.json"))["kind"], "ridge");
  test::expect_report_stamp(read_file(dir + "/s.html"), {test::shared_path("models/stories260K.gguf"),
                                                         test::shared_path("models/stories260K-kjv-top.gguf"),
                                                         test::shared_path("models/prompts-stories-kjv.txt")});
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


// One reduced sweep checks the TTFT protocol fields and the budget's choice: the anchors
// subset, source prefill and stored-state load counted beside the handoff, the bytes handed
// over, and the fastest configuration meeting the budget judged on calibration prompts.
TEST(Sweep, TtftCountsTheSourceAndTheStoredLoadAndTheBudgetPicksTheFastest) {
  SweepOptions o = small("stories260K-kjv-top.gguf");
  o.anchors = {2, 5};  // the exact hybrid and pure mapping only
  o.work_dir = test::temp_dir("sweep-stored");
  o.budget = FidelityBudget::parse("kl<=0", "test");  // only exact configurations meet it
  o.budget_prompts = 3;
  o.ttft_case = TtftCase::handoff;
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
  EXPECT_EQ(c["ttft_case"], "handoff");
  EXPECT_EQ(c["candidates"].size(), 4u);
  EXPECT_EQ(c["candidates"][0]["comparisons"].get<int>(), 3);
  EXPECT_FALSE(c["candidates"][0]["meets_budget"].get<bool>());  // identity reuse of another model
  EXPECT_TRUE(c["candidates"][1]["meets_budget"].get<bool>());   // the exact hybrid
  const double full = c["full_prefill_seconds"].get<double>();
  EXPECT_GT(full, 0.0);
  EXPECT_EQ(c["candidates"][3]["ttft_seconds"].get<double>(), full);
  // Only the exact hybrid meets kl<=0; it is chosen exactly when its measured handoff beats
  // the full prefill timed beside it, and otherwise the report says so.
  const double hybrid = c["candidates"][1]["ttft_seconds"].get<double>();
  EXPECT_GT(hybrid, 0.0);
  EXPECT_EQ(c["beats_full_prefill"].get<bool>(), hybrid < full);
  if (hybrid < full) {
    EXPECT_EQ(c["chosen"]["config"], "anchor");
    EXPECT_EQ(c["chosen"]["a"].get<int>(), 2);
    EXPECT_EQ(c["calibration"]["mean_kl"].get<double>(), 0.0);
    EXPECT_EQ(c["held_out"]["agree"].get<int>(), 4);
    EXPECT_EQ(c["held_out"]["ttft_stored_ratio"].get<double>(), j["rows"][1]["ttft_stored_ratio"].get<double>());
  } else {
    EXPECT_EQ(c["chosen"]["config"], "full-prefill");
    EXPECT_NE(c["verdict"].get<std::string>().find("no boundary meeting kl<=0 beats the target's full prefill"),
              std::string::npos);
  }
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

BudgetCandidate candidate(const char* name, int a, double kl, double handoff, double with_source) {
  BudgetCandidate c;
  c.config = name, c.a = a, c.work_saved = a / 5.0;
  c.comparisons = 2, c.agree = 2, c.sum_kl = 2 * kl;
  c.ttft_handoff = handoff, c.ttft_with_source = with_source, c.ttft_stored = handoff + 0.001;
  return c;
}

// The fastest meeting the budget, and only when it beats the full prefill; never the full
// prefill's own row, never a NaN KL.
TEST(SweepBudget, FastestMeetingTheBudgetAndOnlyBelowTheFullPrefill) {
  const double full = 1.0;
  const std::vector<BudgetCandidate> c = {
      candidate("identity-reuse", 5, 0.5, 0.05, 1.01), candidate("anchor", 2, 0.0, 0.7, 1.2),
      candidate("anchor", 4, 0.02, 0.3, 1.05), candidate("anchor", 5, 0.04, 0.2, 1.1),
      candidate("full-prefill", 0, 0.0, full, full)};
  EXPECT_EQ(choose_fastest(c, FidelityBudget::parse("kl<=0.03", "t"), TtftCase::handoff, full), 2);
  EXPECT_EQ(choose_fastest(c, FidelityBudget::parse("kl<=0.05", "t"), TtftCase::handoff, full), 3);
  EXPECT_EQ(choose_fastest(c, FidelityBudget::parse("kl<=1", "t"), TtftCase::handoff, full), 0);
  EXPECT_EQ(choose_fastest(c, FidelityBudget::parse("kl<=0", "t"), TtftCase::handoff, full), 1);
  // Counting the source's prefill, every boundary is slower than the full prefill: none.
  EXPECT_EQ(choose_fastest(c, FidelityBudget::parse("kl<=1", "t"), TtftCase::with_source, full), -1);
  EXPECT_EQ(fastest_meeting(c, FidelityBudget::parse("kl<=1", "t"), TtftCase::with_source), 0);
  // Equal to the full prefill is not faster.
  EXPECT_EQ(choose_fastest(c, FidelityBudget::parse("kl<=0", "t"), TtftCase::handoff, 0.7), -1);
  std::vector<BudgetCandidate> nan = {candidate("anchor", 5, std::nan(""), 0.1, 0.1), c.back()};
  EXPECT_EQ(choose_fastest(nan, FidelityBudget::parse("kl<=1", "t"), TtftCase::handoff, full), -1);
  EXPECT_EQ(parse_ttft_case("with-source", "t"), TtftCase::with_source);
  EXPECT_NE(test::error_of([] { parse_ttft_case("fast", "t"); })
                .find("--ttft-case: expected handoff, with-source or stored, found 'fast'"),
            std::string::npos);
}

// When nothing beats the full prefill the choice is the full prefill, and the JSON and the
// table say so plainly, naming the fastest boundary and its ratio.
TEST(SweepBudget, TheReportSaysSoWhenNoBoundaryBeatsTheFullPrefill) {
  const std::vector<BudgetCandidate> c = {candidate("identity-reuse", 5, 0.5, 0.05, 1.3),
                                          candidate("anchor", 2, 0.0, 0.7, 1.2), candidate("full-prefill", 0, 0.0, 1.0, 1.0)};
  SweepResult r;
  r.label = "cross-model";
  r.provenance = {{"shared_layers", 2}};
  r.rows.resize(3);
  r.rows[0].config = "identity-reuse", r.rows[1].config = "anchor", r.rows[2].config = "full-prefill";
  r.rows[1].a = 2;
  r.choice = budget_choice(c, FidelityBudget::parse("kl<=0.01", "t"), TtftCase::with_source, 1.0, false,
                           "2 calibration prompts withheld from the fit", 5, 1, r.rows);
  EXPECT_FALSE(r.recommends_boundary());
  EXPECT_FALSE(r.choice["beats_full_prefill"].get<bool>());
  EXPECT_EQ(r.choice["chosen"]["config"], "full-prefill");
  EXPECT_EQ(r.choice["fastest_meeting_budget"]["a"].get<int>(), 2);
  EXPECT_EQ(r.choice["timing"], "median of 5 runs per prompt, summed over the budget prompts, 1 thread, timed in this "
                                "run beside the target's full prefill");
  const std::string verdict =
      "no boundary meeting kl<=0.01 beats the target's full prefill: the fastest, anchor a = 2, takes 1.200x its time "
      "(TTFT with the source's prefill up to the boundary); use the full prefill";
  EXPECT_EQ(r.choice["verdict"], verdict);
  const std::string table = r.table();
  EXPECT_NE(table.find("choice (kl<=0.01, on 2 calibration prompts withheld from the fit): full-prefill\n  " + verdict),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("TTFT by with-source, median of 5 runs"), std::string::npos) << table;
  // Nothing meets the budget at all: said too.
  r.choice = budget_choice(c, FidelityBudget::parse("kl<=0", "t"), TtftCase::handoff, 1.0, false, "x", 3, 2, r.rows);
  EXPECT_EQ(r.choice["verdict"], "anchor a = 2 meets kl<=0; its TTFT (handoff + first decode, the source state in "
                                 "memory) is 0.700x the target's full prefill");
  std::vector<BudgetCandidate> none = {candidate("identity-reuse", 5, 0.5, 0.05, 1.3), c.back()};
  std::vector<SweepRow> rows2(2);
  rows2[1].config = "full-prefill";
  EXPECT_EQ(budget_choice(none, FidelityBudget::parse("kl<=0.1", "t"), TtftCase::handoff, 1.0, false, "x", 3, 2, rows2)
                ["verdict"],
            "no boundary meets kl<=0.1; use the full prefill");
}

// The case: stories260K -> kjv-top, every configuration meeting the budget, timed with
// the source's prefill. Whatever the machine's load, the recommendation is never slower than
// the target's full prefill measured beside it; the CLI exits 1 saying so when nothing beats it.
TEST(Sweep, KjvTopNeverRecommendsABoundarySlowerThanTheFullPrefill) {
  SweepOptions o = small("stories260K-kjv-top.gguf");
  o.budget = FidelityBudget::parse("agreement>=0", "test");
  o.budget_prompts = 4;
  o.timing_repeats = 3;
  const SweepResult r = run_sweep(o);
  const nlohmann::json& c = r.choice;
  EXPECT_EQ(c["ttft_case"], "with-source");
  const double full = c["full_prefill_seconds"].get<double>();
  const int pick = c["chosen"]["index"].get<int>();
  if (pick >= 0) {
    EXPECT_LT(c["candidates"][size_t(pick)]["ttft_with_source_seconds"].get<double>(), full);
    EXPECT_TRUE(r.recommends_boundary());
  } else {
    EXPECT_EQ(c["chosen"]["config"], "full-prefill");
    for (const auto& cand : c["candidates"]) EXPECT_GE(cand["ttft_with_source_seconds"].get<double>(), full);
    EXPECT_NE(r.table().find("no boundary meeting agreement>=0 beats the target's full prefill"), std::string::npos);
  }
  // No boundary meets kl<=0 when the only anchor swept is mapped (a = 3): exit 1, the reports
  // written first, the reason on stderr.
  const std::string dir = test::temp_dir("sweep-none");
  std::string out;
  const int rc = test::run_command(
      test::ember_binary() + " study sweep --source " + test::shared_path("models/stories260K.gguf") + " --target " +
          test::shared_path("models/stories260K-kjv-top.gguf") + " --prompts " +
          test::shared_path("models/prompts-stories-kjv.txt") +
          " --split 12:2 --greedy-steps 2 --repeats 1 --anchors 3 --fidelity-budget 'kl<=0' --budget-prompts 2 --json-out " +
          dir + "/s.json",
      &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("ember: study sweep: no boundary meets kl<=0; use the full prefill"), std::string::npos) << out;
  EXPECT_FALSE(nlohmann::json::parse(read_file(dir + "/s.json"))["choice"]["beats_full_prefill"].get<bool>());
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
