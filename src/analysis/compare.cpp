#include "analysis/compare.h"

#include "util/error.h"

namespace ember::analysis {

namespace {

CompareReport measure(const ComparedState& left, const ComparedState& right,
                      const CompareOptions& options, ThreadPool* pool) {
  check_state_consistent(left, "kv compare LEFT");
  check_state_consistent(right, "kv compare RIGHT");
  check_alignment(left, right);
  validate_thresholds(options.thresholds);
  CompareOptions opts = options;
  if (opts.thresholds.min_r2) opts.r2 = true;  // a threshold on r2 needs the metric
  CompareReport r;
  r.left = SideSummary{left.identity, left.coords.resume_token};
  r.right = SideSummary{right.identity, right.coords.resume_token};
  // Content hashes are recomputed, never trusted from the loader.
  r.left.identity.keys_sha256 = active_keys_sha256(left.cache);
  r.left.identity.values_sha256 = active_values_sha256(left.cache);
  r.right.identity.keys_sha256 = active_keys_sha256(right.cache);
  r.right.identity.values_sha256 = active_values_sha256(right.cache);
  r.coords = left.coords;
  r.crossing = classify_crossing(left.identity, right.identity);
  r.options = opts;
  r.metrics = compare_caches(left.cache, right.cache, opts.r2, pool);
  r.failures = find_failures(r.metrics, opts.thresholds);
  return r;
}

}  // namespace

CompareReport compare_states(const ComparedState& left, const ComparedState& right,
                             const CompareOptions& options, ThreadPool* pool) {
  return measure(left, right, options, pool);
}

CompareReport compare_states(const ComparedState& left, const PerturbedState& right,
                             const CompareOptions& options, ThreadPool* pool) {
  CompareReport r = measure(left, right.state(), options, pool);
  r.perturbation = right.receipt();
  r.perturbation_receipt_sha256 = right.receipt_sha256();
  return r;
}

}  // namespace ember::analysis
