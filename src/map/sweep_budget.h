#pragma once
// The sweep's choice (study sweep --fidelity-budget): given a fidelity budget, the cheapest
// boundary that meets it on calibration prompts, and what that choice gives on held-out ones.
//
//   kl<=X         mean KL(target || config) of the next token, nats
//   rel<=X        mean relative L2 logit error
//   agreement>=X  fraction of next tokens equal to the target's own full prefill's
//
// The budget is judged on the first N calibration prompts of the frozen split (selection never
// sees an evaluation prompt), withheld from the mapper's fit by default: judged on the prompts
// it was fitted on, a mapper fitted on a few prompts looks far better than it is (Qwen2.5-0.5B
// geometry, 8 x 128 tokens: KL 0.0095 in sample, 0.77 held out), and the budget would pick a
// boundary that fails it. The chosen configuration's fidelity and TTFT are then the
// evaluation rows' (held out). "Cheapest" is by the handoff's
// target-side prefill work (weight MACs, AnchorReport::prefill_work_saved: deterministic and
// monotone in a), ties broken by the mapping's work (identity reuse before pure mapping): a
// measured TTFT on a shared machine would let noise pick the boundary. The target's own full
// prefill meets every budget and is the answer when nothing cheaper does.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ember::map {

struct FidelityBudget {
  std::string metric;  // "" (no budget) | kl | rel | agreement
  double threshold = 0;
  bool active() const { return !metric.empty(); }
  // "kl<=0.01", "rel<=1e-3", "agreement>=0.99"; Error naming `where` and the flag otherwise.
  static FidelityBudget parse(const std::string& text, const std::string& where);
  std::string text() const;  // the canonical spelling, e.g. "kl<=0.01"
};

// One configuration's fidelity on the calibration prompts and its cost.
struct BudgetCandidate {
  std::string config;  // "identity-reuse" | "anchor" | "full-prefill"
  int a = 0;
  double work_saved = 0;      // AnchorReport::prefill_work_saved
  double mapping_macs = 0;    // AnchorReport::mapping_macs_per_token
  int64_t comparisons = 0, agree = 0;
  double sum_kl = 0, sum_rel = 0;
  double mean_kl() const { return comparisons ? sum_kl / double(comparisons) : 0.0; }
  double mean_rel() const { return comparisons ? sum_rel / double(comparisons) : 0.0; }
  double agreement() const { return comparisons ? double(agree) / double(comparisons) : 0.0; }
  bool meets(const FidelityBudget& b) const;  // a NaN KL never meets a budget
  nlohmann::json to_json() const;
};

// The index of the cheapest candidate that meets the budget (see the header); -1 if none does.
int choose_cheapest(const std::vector<BudgetCandidate>& candidates, const FidelityBudget& budget);

}  // namespace ember::map
