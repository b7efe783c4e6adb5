#include "util/kl.h"

#include <cmath>

#include "util/error.h"

namespace ember {

std::vector<double> log_softmax(const float* x, size_t n) {
  EMBER_CHECK(n >= 1);
  double max = double(x[0]);
  for (size_t i = 1; i < n; ++i) max = std::fmax(max, double(x[i]));
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - max);
  const double lse = max + std::log(sum);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = double(x[i]) - lse;
  return out;
}

std::optional<double> kl_divergence(const float* target, const float* other, size_t n) {
  EMBER_CHECK(n >= 1);
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(target[i]) || !std::isfinite(other[i])) return std::nullopt;
  const std::vector<double> lp = log_softmax(target, n), lq = log_softmax(other, n);
  double kl = 0;
  for (size_t i = 0; i < n; ++i) {
    const double p = std::exp(lp[i]);
    if (p > 0) kl += p * (lp[i] - lq[i]);
  }
  return kl > 0 ? kl : 0.0;
}

}  // namespace ember
