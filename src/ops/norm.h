#pragma once
// RMSNorm of the canonical-v1 contract (docs/numerics.md).
#include <cstdint>

namespace ember::ops {

// y = (x * s) * w with s = 1 / sqrt(dot_f32(x, x, n) / n + eps), every step an f32 IEEE
// operation and the sum of squares the canonical dot (ops/dot.h), so the result depends only
// on x, w, n and eps. x (n,), w (n,) -> y (n,); y may alias x.
void rmsnorm_row(const float* x, const float* w, int64_t n, float eps, float* y);

}  // namespace ember::ops
