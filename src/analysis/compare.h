#pragma once
// `ember kv compare` as a library: align two states, measure every (layer, KV head, part),
// check thresholds, optionally run the model diagnostics, and render the report as
// canonical JSON or a human table (docs/compare.md).
#include <optional>
#include <string>

#include "analysis/compare_metrics.h"
#include "analysis/compare_state.h"
#include "analysis/compare_thresholds.h"
#include "analysis/diagnostics.h"
#include "analysis/perturb.h"

namespace ember::analysis {

struct CompareOptions {
  bool r2 = false;
  Thresholds thresholds;
};

struct SideSummary {
  StateIdentity identity;
  int32_t resume_token = -1;
};

struct CompareReport {
  SideSummary left, right;
  StateCoordinates coords;  // LEFT's, which RIGHT's equal but for the resume token
  Crossing crossing;
  std::optional<PerturbReceipt> perturbation;  // applied to RIGHT
  std::string perturbation_receipt_sha256;
  CompareOptions options;
  KvMetrics metrics;
  std::vector<Failure> failures;  // layer-major; failures[0] is the first exceedance
  std::optional<Diagnostics> diagnostics;
  bool pass() const { return failures.empty(); }
};

// Checks each state's consistency and their alignment (Error naming the coordinate), then
// measures. pool may be null.
CompareReport compare_states(const ComparedState& left, const ComparedState& right,
                             const CompareOptions& options, ThreadPool* pool = nullptr);
// RIGHT is a perturbed state: the report names its receipt.
CompareReport compare_states(const ComparedState& left, const PerturbedState& right,
                             const CompareOptions& options, ThreadPool* pool = nullptr);

// The K and V cache types a side stands for ("f16"; a foreign cache's source types; for a
// side perturbed by `p` with --quantize, "q4_0 (emulated in f16, layers 0,1)" on its parts).
std::pair<std::string, std::string> side_cache_types(const SideSummary& s, const PerturbReceipt* p);

// Canonical JSON: fixed key order, no timing, host, path or process fields, doubles in
// shortest round-trip form. Same report, same bytes.
std::string report_json(const CompareReport& r);
// The default human-readable table.
std::string report_table(const CompareReport& r);

}  // namespace ember::analysis
