#pragma once
// Per-head K/V metrics between two caches of one geometry (docs/compare.md, "metrics").
//
//   left, right: k|v[layer][kv_head][position][head_dim] f16 bit patterns, positions
//   [0, n_pos) of each (layer, head) compared as one vector of n_pos * head_dim elements.
//
// Contract: every sum is taken in f64 over the f16 values, sequentially in storage order
// (position-major, then dim) with one accumulator per quantity. Each term (a product, square
// or difference of two f16 values) is exact in f64, so only the sums round, always in the
// same order: the results do not depend on the thread count or the SIMD path, and one
// (layer, head, part) is always computed by a single task.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/kv_cache.h"

namespace ember {
class ThreadPool;
}

namespace ember::analysis {

enum class KvPart { k, v };
const char* part_name(KvPart p);  // "k" | "v"

// The metrics of one (layer, head, part). LEFT is the reference, RIGHT the candidate.
// Float metrics are absent (nullopt, JSON null) when any element on either side is NaN or
// Inf (counted in non_finite), and r2 is absent when not requested or undefined.
struct PartMetrics {
  uint64_t elements = 0;    // n_pos * head_dim
  uint64_t mismatches = 0;  // elements whose f16 bit patterns differ (so -0 vs +0 counts)
  uint64_t non_finite = 0;  // elements that are NaN or Inf on the left or the right
  std::optional<double> cosine;   // <L,R> / (|L| |R|); 1 if both are zero, 0 if one is
  std::optional<double> mse;      // sum (R-L)^2 / elements
  std::optional<double> r2;       // 1 - SS(R-L) / SS(R - mean R): RIGHT explained by LEFT
  std::optional<double> max_abs;  // max |R-L|
};

// The value of a finite f16 as f64 (exact; equal to f16_to_f32). Non-finite: unspecified.
double f16_value(uint16_t h);

// Metrics of n f16 elements. With r2, takes a second pass over RIGHT for SS(R - mean R).
PartMetrics part_metrics(const uint16_t* left, const uint16_t* right, size_t n, bool r2);

struct HeadMetrics {
  PartMetrics k, v;
  const PartMetrics& part(KvPart p) const { return p == KvPart::k ? k : v; }
};

struct KvMetrics {
  int n_layers = 0, n_kv_heads = 0, head_dim = 0, n_pos = 0;
  bool r2 = false;
  std::vector<HeadMetrics> heads;  // [layer][kv_head]
  const HeadMetrics& at(int layer, int head) const {
    return heads[size_t(layer) * size_t(n_kv_heads) + size_t(head)];
  }
  bool identical() const;  // no bit mismatch anywhere
};

// Compares the active positions of two caches. The geometry (layers, heads, head_dim,
// n_pos) must match: an internal invariant here, since alignment is checked before
// (compare_align.h). pool may be null (single thread); results are the same either way.
KvMetrics compare_caches(const model::KvCache& left, const model::KvCache& right, bool r2,
                         ThreadPool* pool = nullptr);

}  // namespace ember::analysis
