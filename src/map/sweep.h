#pragma once
// The boundary sweep on real models (seed 001's "next useful test"): for a source/target pair
// with s verified shared layers, sweep the recompute anchor a from s to L and measure, per a,
// fidelity against the target's own full prefill (next-token agreement, relative logit error,
// greedy agreement over 16 steps) and time-to-first-token against the target's full prefill
// of the same prompt; plus identity reuse (the source cache used unchanged). a = L is pure
// mapping, a = s the exact hybrid.
//
// Protocol per evaluation prompt of P tokens: the source prefills the first P-1 tokens (timed,
// with the time at which its residual reaches each layer boundary); the handoff builds the
// target's prefix cache and the target decodes the last prompt token (timed together), then
// follows its own argmax for the remaining greedy steps. The reference is the target's full
// prefill of all P tokens (timed the same way) and its own greedy continuation. Three TTFTs
// per configuration, each a sum over the evaluation prompts of per-prompt medians over the
// repeats (a median, not a minimum: a shared machine's best run is not what a user gets),
// and each as a ratio to the full prefill measured in the same run:
//   ttft_seconds            handoff + first decode: the source state is already in memory;
//   ttft_with_source        + the source's prefill of the prefix up to what the handoff reads
//                           (through layer a-1, all layers for a = L; nothing for a = 0); the
//                           state moves in memory (the handoff's copy, inside the handoff time);
//   ttft_stored             + loading the source state from disk instead (when work_dir is
//                           set): kv::read_state_dir of the source's ember.kv-snapshot.v1 of
//                           the prefix (all layers, SHA-256 checked; written once per prompt,
//                           untimed, read back warm from the page cache), plus the raw f32
//                           residual rows at the boundary when 0 < a < L.
// handoff_bytes: what crosses from the source per prompt (K/V of layers [0, a) in f16, plus
// the residual in f32 when 0 < a < L), summed.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "map/sweep_budget.h"
#include "util/html_report.h"

namespace ember::map {

struct SweepOptions {
  std::string source_path, target_path, prompts_path;
  // When non-empty: the prompts as ids (the CLI's --prompt-ids / JSONL), used instead of reading
  // prompts_path; the same length filters apply.
  std::vector<std::vector<int32_t>> prompts;
  std::string tokenizer_path;   // "" -> each GGUF's own tokenizer; else this tokenizer.json for both
  int n_calib = 320, n_eval = 80;
  uint64_t seed = 1;
  double lambda = 1.0;          // the one penalty of the fit
  // "affine": affine maps with the L2 anchor toward the identity (when head dims match);
  // "ridge": plain ridge (no bias, penalty toward 0), the ridge pilot of seed 000.
  std::string kind = "affine";
  int greedy_steps = 16;
  int timing_repeats = 3;       // TTFT per prompt and configuration: the median of these
  int threads = 1;
  std::string label;            // "" -> auto: quantization-boundary if tensor types differ
  std::vector<int> anchors;     // the anchors swept, each in [s, L]; empty -> every a in [s, L]
  std::string work_dir;         // scratch for the stored-state timing; "" -> ttft_stored not measured
  FidelityBudget budget;        // inactive -> no choice made (sweep_budget.h)
  TtftCase ttft_case = TtftCase::with_source;  // the TTFT the choice is timed by (stored needs work_dir)
  int budget_prompts = 8;       // calibration prompts the budget is judged on (the first of the split)
  bool budget_in_sample = false;  // false: those prompts are withheld from the fit; true: fitted on too
};

struct SweepRow {
  std::string config;  // "identity-reuse", "anchor", "full-prefill"
  int s = 0, a = 0;
  bool pure_mapping = false, exact_hybrid = false;
  int64_t comparisons = 0, agree = 0;
  double mean_rel_err = 0, max_rel_err = 0;
  double mean_kl = 0, max_kl = 0;         // KL(target || config) of the next token, nats
  int64_t bit_identical = 0;              // decode logits identical to the reference's
  double greedy_prefix_agreement = 0;     // mean fraction of steps before the first divergence
  int64_t greedy_exact = 0;               // prompts whose whole greedy sequence matched
  double ttft_seconds = 0;                // summed over prompts (median over repeats each)
  double ttft_ratio = 0;                  // ttft_seconds / full prefill's
  double prefill_work_saved = 0;          // weight MACs, see AnchorReport
  double source_prefill_seconds = 0;      // the source's prefill up to the boundary, summed
  double load_seconds = 0;                // reading the stored source state, summed
  double ttft_with_source_seconds = 0, ttft_with_source_ratio = 0;
  double ttft_stored_seconds = 0, ttft_stored_ratio = 0;  // 0 when not measured
  double handoff_bytes = 0;               // summed over prompts
};

struct SweepResult {
  SweepOptions options;
  std::string label;
  nlohmann::json provenance;  // identities, shared layers, split/mapper hashes, R²
  std::vector<SweepRow> rows;
  bool stored_measured = false;
  // The --fidelity-budget choice (null without one): the budget, the TTFT case and timing, the
  // candidates' calibration fidelity and TTFTs beside the full prefill's, whether any beats
  // it (`beats_full_prefill`, `verdict`), the chosen configuration and its held-out row.
  nlohmann::json choice;
  // False when a budget was given and no boundary meeting it beat the full prefill.
  bool recommends_boundary() const { return choice.is_null() || choice.value("beats_full_prefill", false); }
  nlohmann::json to_json() const;
  std::string table() const;
  // Self-contained: inline SVG plots, no network; `stamp` names the inputs, build and date.
  std::string html(const html::Stamp& stamp = {}) const;
};

SweepResult run_sweep(const SweepOptions& options);

// The `choice` object of a budgeted sweep (sweep_budget.h): candidates[i] is configuration i
// on the budget prompts and rows[i] the same configuration held out (the last of both: the
// full prefill); full_prefill_seconds is the target's full prefill of the budget prompts,
// timed beside them. Picks choose_fastest's candidate, else the full prefill, and says which
// in `verdict` and `beats_full_prefill`.
nlohmann::json budget_choice(const std::vector<BudgetCandidate>& candidates, const FidelityBudget& budget, TtftCase c,
                             double full_prefill_seconds, bool stored, const std::string& judged_on, int repeats,
                             int threads, const std::vector<SweepRow>& rows);

}  // namespace ember::map
