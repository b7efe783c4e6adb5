#include "map/sweep_budget.h"

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

nlohmann::json BudgetCandidate::to_json() const {
  return {{"config", config}, {"a", a}, {"prefill_work_saved", work_saved},
          {"comparisons", comparisons}, {"agree", agree}, {"agreement", agreement()},
          {"mean_kl", mean_kl()}, {"mean_rel_logit_error", mean_rel()}};
}

int choose_cheapest(const std::vector<BudgetCandidate>& c, const FidelityBudget& budget) {
  int best = -1;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].meets(budget)) continue;
    if (best < 0) {
      best = int(i);
      continue;
    }
    const BudgetCandidate& b = c[size_t(best)];
    if (c[i].work_saved > b.work_saved || (c[i].work_saved == b.work_saved && c[i].mapping_macs < b.mapping_macs))
      best = int(i);
  }
  return best;
}

}  // namespace ember::map
