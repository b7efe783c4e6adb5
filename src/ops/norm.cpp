#include "ops/norm.h"

#include <cmath>

#include "ops/dot.h"

namespace ember::ops {

void rmsnorm_row(const float* x, const float* w, int64_t n, float eps, float* y) {
  const float ss = dot_f32(x, x, n);
  const float s = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * s) * w[i];
}

void layernorm_row(const float* x, const float* w, int64_t n, float eps, float* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float m = sum / float(n);
  float sq = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - m;
    sq += d * d;
  }
  const float s = 1.0f / std::sqrt(sq / float(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - m) * s) * w[i];
}

}  // namespace ember::ops
