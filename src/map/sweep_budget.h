#pragma once
// The sweep's choice (study sweep --fidelity-budget): given a fidelity budget, the fastest
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
// evaluation rows' (held out).
//
// "Fastest" is by time to first token measured in the same run on those budget prompts (the
// median of the repeats per prompt, summed over prompts), in the case the user names
// (TtftCase): the handoff alone, with the source's prefill, or from a stored state. The
// target's own full prefill, timed the same way in the same run, is the bar: a boundary is
// recommended only when its TTFT is below it, and when none meeting the budget is, the
// answer is the full prefill and the report says so (exit 1 from the CLI). Weight MACs saved
// are reported beside, not used: on stories260K -> kjv-top the MAC order chose a = 2 whatever
// its time, and issue 34 found its TTFT with the source's prefill above the full prefill's.
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

// The TTFT a choice is timed by (`--ttft-case`): handoff + first decode (the source state is
// in memory), + the source's prefill up to the boundary, or + loading the stored source state.
enum class TtftCase { handoff, with_source, stored };
TtftCase parse_ttft_case(const std::string& text, const std::string& where);  // Error naming --ttft-case
const char* ttft_case_name(TtftCase c);  // "handoff" | "with-source" | "stored"

// One configuration's fidelity on the calibration prompts and its cost.
struct BudgetCandidate {
  std::string config;  // "identity-reuse" | "anchor" | "full-prefill"
  int a = 0;
  double work_saved = 0;      // AnchorReport::prefill_work_saved
  double mapping_macs = 0;    // AnchorReport::mapping_macs_per_token
  int64_t comparisons = 0, agree = 0;
  double sum_kl = 0, sum_rel = 0;
  // Seconds summed over the budget prompts, each the median of the repeats; stored is 0 when
  // not measured. The full prefill's three are its own prefill time.
  double ttft_handoff = 0, ttft_with_source = 0, ttft_stored = 0;
  double ttft(TtftCase c) const {
    return c == TtftCase::handoff ? ttft_handoff : c == TtftCase::with_source ? ttft_with_source : ttft_stored;
  }
  double mean_kl() const { return comparisons ? sum_kl / double(comparisons) : 0.0; }
  double mean_rel() const { return comparisons ? sum_rel / double(comparisons) : 0.0; }
  double agreement() const { return comparisons ? double(agree) / double(comparisons) : 0.0; }
  bool meets(const FidelityBudget& b) const;  // a NaN KL never meets a budget
  // full_prefill_seconds > 0 adds the TTFTs as ratios to it; stored null when not measured.
  nlohmann::json to_json(double full_prefill_seconds = 0, bool stored = false) const;
};

// The candidate (never the "full-prefill" row) that meets the budget with the lowest TTFT of
// case `c`, provided that TTFT is below full_prefill_seconds (ties: the first); -1 if none.
int choose_fastest(const std::vector<BudgetCandidate>& candidates, const FidelityBudget& budget, TtftCase c,
                   double full_prefill_seconds);
// The candidate meeting the budget with the lowest TTFT of case `c` whether or not it beats
// the full prefill (the "fastest, yet slower" the report names); -1 if none.
int fastest_meeting(const std::vector<BudgetCandidate>& candidates, const FidelityBudget& budget, TtftCase c);

}  // namespace ember::map
