#include <algorithm>
#include <cmath>

#include "analysis/diagnostics.h"

namespace ember::analysis {

VectorCompare compare_vectors(const float* a, const float* b, size_t n) {
  // f64, one accumulator per quantity, element order: the same contract as the K/V metrics.
  double aa = 0, bb = 0, ab = 0, dd = 0, max_abs = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    const double d = y - x;
    aa += x * x;
    bb += y * y;
    ab += x * y;
    dd += d * d;
    max_abs = std::max(max_abs, std::fabs(d));
  }
  VectorCompare out;
  if (aa == 0 && bb == 0) {
    out.cosine = 1.0;
  } else if (aa == 0 || bb == 0) {
    out.cosine = 0.0;
  } else {
    // As for K/V: exactly 1 for identical vectors; the split form only if aa * bb overflows.
    const double p = aa * bb;
    const double denom = std::isfinite(p) ? std::sqrt(p) : std::sqrt(aa) * std::sqrt(bb);
    out.cosine = std::clamp(ab / denom, -1.0, 1.0);
  }
  if (aa > 0) {
    out.rel_error = std::sqrt(dd) / std::sqrt(aa);
  } else if (dd == 0) {
    out.rel_error = 0.0;
  }
  out.max_abs = max_abs;
  return out;
}

}  // namespace ember::analysis
