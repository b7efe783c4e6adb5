#include "map/metrics.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "util/kl.h"

namespace ember::map {

int32_t first_argmax(const float* x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

LogitComparison compare_logits(const float* x, const float* ref, int n) {
  LogitComparison c;
  c.argmax = first_argmax(x, n);
  c.ref_argmax = first_argmax(ref, n);
  c.same_argmax = c.argmax == c.ref_argmax;
  double diff = 0, norm = 0;
  for (int i = 0; i < n; ++i) {
    const double d = double(x[i]) - double(ref[i]);
    diff += d * d;
    norm += double(ref[i]) * double(ref[i]);
    if (std::fabs(d) > c.max_abs) c.max_abs = std::fabs(d);
  }
  c.rel_l2 = norm > 0 ? std::sqrt(diff) / std::sqrt(norm) : std::sqrt(diff);
  const std::optional<double> kl = kl_divergence(ref, x, size_t(n));
  c.kl = kl ? *kl : std::numeric_limits<double>::quiet_NaN();
  c.bit_identical = std::memcmp(x, ref, size_t(n) * sizeof(float)) == 0;
  return c;
}

}  // namespace ember::map
