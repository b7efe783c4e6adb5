#pragma once
// Threshold checks over K/V metrics: a deterministic failure list in layer-major order
// (layer, then head, then part k before v, then metric in the order cosine, mse, r2,
// max_abs) whose first entry is the first exceedance (docs/compare.md, "thresholds").
#include <optional>
#include <string>
#include <vector>

#include "analysis/compare_metrics.h"

namespace ember::analysis {

struct Thresholds {
  std::optional<double> min_cosine;  // fails when cosine < min_cosine
  std::optional<double> max_mse;     // fails when mse > max_mse
  std::optional<double> min_r2;      // fails when r2 < min_r2 (needs the r2 metric)
  std::optional<double> max_abs;     // fails when max_abs > max_abs
  bool any() const { return min_cosine || max_mse || min_r2 || max_abs; }
};

// One exceedance. value is absent when the metric could not be computed (non-finite
// elements, or r2 undefined): an absent value always fails its threshold, since nothing
// was shown to be within it.
struct Failure {
  int layer = 0;
  int head = 0;
  KvPart part = KvPart::k;
  std::string metric;  // "cosine" | "mse" | "r2" | "max_abs"
  std::optional<double> value;
  double threshold = 0;
};

// Error if a threshold is not a finite number or is out of its metric's range.
void validate_thresholds(const Thresholds& t);
std::vector<Failure> find_failures(const KvMetrics& m, const Thresholds& t);

}  // namespace ember::analysis
