#include "map/sweep_budget.h"

#include "map/sweep.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/error.h"

namespace ember::map {

FidelityBudget FidelityBudget::parse(const std::string& text, const std::string& where) {
  const char* expected = "kl<=X, rel<=X or agreement>=X with X a finite number >= 0 (agreement: <= 1)";
  FidelityBudget b;
  std::string rest;
  for (const auto& [name, op] : {std::pair{"kl", "<="}, std::pair{"rel", "<="}, std::pair{"agreement", ">="}}) {
    const std::string prefix = std::string(name) + op;
    if (text.rfind(prefix, 0) == 0) {
      b.metric = name;
      rest = text.substr(prefix.size());
    }
  }
  if (b.metric.empty() || rest.empty()) fail_field(where, "--fidelity-budget", expected, "'" + text + "'");
  char* end = nullptr;
  b.threshold = std::strtod(rest.c_str(), &end);
  if (end != rest.c_str() + rest.size() || !std::isfinite(b.threshold) || b.threshold < 0 ||
      (b.metric == "agreement" && b.threshold > 1))
    fail_field(where, "--fidelity-budget", expected, "'" + text + "'");
  return b;
}

std::string FidelityBudget::text() const {
  if (!active()) return "";
  char v[64];
  std::snprintf(v, sizeof v, "%.10g", threshold);
  return metric + (metric == "agreement" ? ">=" : "<=") + v;
}

bool BudgetCandidate::meets(const FidelityBudget& b) const {
  if (comparisons == 0) return false;
  if (b.metric == "kl") return mean_kl() <= b.threshold;  // false for NaN
  if (b.metric == "rel") return mean_rel() <= b.threshold;
  if (b.metric == "agreement") return agreement() >= b.threshold;
  return false;
}

TtftCase parse_ttft_case(const std::string& text, const std::string& where) {
  if (text == "handoff") return TtftCase::handoff;
  if (text == "with-source") return TtftCase::with_source;
  if (text == "stored") return TtftCase::stored;
  fail_field(where, "--ttft-case", "handoff, with-source or stored", "'" + text + "'");
}

const char* ttft_case_name(TtftCase c) {
  return c == TtftCase::handoff ? "handoff" : c == TtftCase::with_source ? "with-source" : "stored";
}

nlohmann::json BudgetCandidate::to_json(double full, bool stored) const {
  nlohmann::json j = {{"config", config}, {"a", a}, {"prefill_work_saved", work_saved},
                      {"comparisons", comparisons}, {"agree", agree}, {"agreement", agreement()},
                      {"mean_kl", mean_kl()}, {"mean_rel_logit_error", mean_rel()},
                      {"ttft_seconds", ttft_handoff}, {"ttft_with_source_seconds", ttft_with_source},
                      {"ttft_stored_seconds", stored ? nlohmann::json(ttft_stored) : nlohmann::json()}};
  if (full > 0) {
    j["ttft_ratio"] = ttft_handoff / full;
    j["ttft_with_source_ratio"] = ttft_with_source / full;
    j["ttft_stored_ratio"] = stored ? nlohmann::json(ttft_stored / full) : nlohmann::json();
  }
  return j;
}

int fastest_meeting(const std::vector<BudgetCandidate>& c, const FidelityBudget& budget, TtftCase k) {
  int best = -1;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].config == "full-prefill" || !c[i].meets(budget)) continue;
    if (best < 0 || c[i].ttft(k) < c[size_t(best)].ttft(k)) best = int(i);
  }
  return best;
}

int choose_fastest(const std::vector<BudgetCandidate>& c, const FidelityBudget& budget, TtftCase k,
                   double full_prefill_seconds) {
  const int best = fastest_meeting(c, budget, k);
  return best >= 0 && c[size_t(best)].ttft(k) < full_prefill_seconds ? best : -1;
}

namespace {

std::string case_words(TtftCase c) {
  return c == TtftCase::handoff ? "handoff + first decode, the source state in memory"
         : c == TtftCase::with_source ? "with the source's prefill up to the boundary"
                                      : "from the source state stored on disk";
}

std::string config_name(const BudgetCandidate& c) {
  return c.config == "anchor" ? "anchor a = " + std::to_string(c.a) : c.config;
}

std::string ratio(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3fx", v);
  return b;
}

}  // namespace

nlohmann::json budget_choice(const std::vector<BudgetCandidate>& candidates, const FidelityBudget& budget, TtftCase k,
                             double full, bool stored, const std::string& judged_on, int repeats, int threads,
                             const std::vector<SweepRow>& rows) {
  EMBER_CHECK(!candidates.empty() && candidates.size() == rows.size() && candidates.back().config == "full-prefill");
  const int pick = choose_fastest(candidates, budget, k, full);
  const int fastest = fastest_meeting(candidates, budget, k);
  nlohmann::json cj = nlohmann::json::array();
  for (const BudgetCandidate& c : candidates) {
    nlohmann::json j = c.to_json(full, stored);
    j["meets_budget"] = c.meets(budget);
    cj.push_back(std::move(j));
  }
  const std::string what = "TTFT " + case_words(k);
  std::string verdict;
  if (pick >= 0) {
    verdict = config_name(candidates[size_t(pick)]) + " meets " + budget.text() + "; its TTFT (" + case_words(k) +
              ") is " + ratio(candidates[size_t(pick)].ttft(k) / full) + " the target's full prefill";
  } else if (fastest >= 0) {
    verdict = "no boundary meeting " + budget.text() + " beats the target's full prefill: the fastest, " +
              config_name(candidates[size_t(fastest)]) + ", takes " + ratio(candidates[size_t(fastest)].ttft(k) / full) +
              " its time (" + what + "); use the full prefill";
  } else {
    verdict = "no boundary meets " + budget.text() + "; use the full prefill";
  }
  const size_t chosen = pick < 0 ? candidates.size() - 1 : size_t(pick);
  const SweepRow& held = rows[chosen];
  nlohmann::json fj;
  if (fastest >= 0)
    fj = {{"config", candidates[size_t(fastest)].config}, {"a", candidates[size_t(fastest)].a},
          {"ttft_seconds", candidates[size_t(fastest)].ttft(k)}, {"ratio", candidates[size_t(fastest)].ttft(k) / full}};
  return {{"budget", budget.text()},
          {"judged_on", judged_on},
          {"ttft_case", ttft_case_name(k)},
          {"timing", "median of " + std::to_string(repeats) + " runs per prompt, summed over the budget prompts, " +
                         std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                         ", timed in this run beside the target's full prefill"},
          {"repeats", repeats},
          {"threads", threads},
          {"full_prefill_seconds", full},
          {"cost_order", "measured " + what + " on the budget prompts; a boundary is recommended only when "
                         "faster than the target's full prefill (weight MACs saved are reported, not used)"},
          {"candidates", cj},
          {"beats_full_prefill", pick >= 0},
          {"fastest_meeting_budget", fj},
          {"verdict", verdict},
          {"chosen", {{"config", held.config}, {"a", held.a}, {"index", pick}}},
          {"calibration", candidates[chosen].to_json(full, stored)},
          {"held_out", {{"comparisons", held.comparisons}, {"agree", held.agree},
                        {"agreement", held.comparisons ? double(held.agree) / double(held.comparisons) : 0.0},
                        {"mean_kl", held.mean_kl}, {"mean_rel_logit_error", held.mean_rel_err},
                        {"greedy_exact", held.greedy_exact},
                        {"ttft_ratio_vs_full_prefill", held.ttft_ratio},
                        {"ttft_with_source_ratio", held.ttft_with_source_ratio},
                        {"ttft_stored_ratio", stored ? nlohmann::json(held.ttft_stored_ratio) : nlohmann::json()},
                        {"prefill_work_saved", held.prefill_work_saved}}}};
}

}  // namespace ember::map
